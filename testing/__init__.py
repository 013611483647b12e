"""Test doubles for groundproxy users, as httpx ships ``MockTransport``: one fake per backend
protocol, and helpers that run the real processes. The runtime packages never import this
one (``tests/test_architecture.py`` checks it); a process is pointed at a fake by name where
a setting takes one (``GROUNDPROXY_EMBEDDER=groundproxy.testing.embedders:HashingEmbedder``).

Fakes (each typed as its protocol, kept in memory, recording what it was asked):

- :mod:`groundproxy.testing.verifiers` — ``ScriptedVerifier`` (``Verifier``): the
  probabilities you choose, per pair; can fail or be slow.
- :mod:`groundproxy.testing.embedders` — ``HashingEmbedder`` (``Embedder``): hashed words
  and bigrams, model-free, deterministic; ``HASHING`` is its import path for settings.
- :mod:`groundproxy.testing.vector_index` — ``MemoryVectorIndex`` (``VectorIndex``): exact
  cosine search, the contract of the hnswlib index.
- :mod:`groundproxy.testing.storage` — ``MemoryStorage`` (``Storage``, composed of one fake
  per narrow protocol: labels, adapters, calibrations in memory; indexes and traces as the
  embedded backend's files in a temporary folder).
- :mod:`groundproxy.testing.fake_upstream_client` — ``FakeUpstream`` (``Upstream``): the
  scripted upstream's answers and failure models in process
  (``build_app(settings, build_deps(settings).replace(upstream=FakeUpstream(rules)))``).
- :mod:`groundproxy.testing.fake_judge` — ``FakeJudge`` (``JudgeCaller``): the LLM judge's
  replies you script (a string, or a function of the call), a delay or an error; it keeps
  every call it got.
- :mod:`groundproxy.testing.clock` — ``FakeClock``, the serving path's clock moved by hand
  (``build_deps(settings).replace(clock=FakeClock(step=0.25))``).

Servers and processes:

- :mod:`groundproxy.testing.fake_upstream` — a scripted OpenAI-compatible upstream server
  (``python -m groundproxy.testing.fake_upstream --port 8099 [--script FILE]``).
- :mod:`groundproxy.testing.processes` — start and stop a real ``groundproxy serve`` process
  and the fake upstream from a test (free ports, readiness waits, clean shutdown).
"""
