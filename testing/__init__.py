"""Test doubles for groundproxy users, as httpx ships ``MockTransport``.

- :mod:`groundproxy.testing.fake_upstream` — a scripted OpenAI-compatible upstream server
  (``python -m groundproxy.testing.fake_upstream --port 8099 [--script FILE]``).
- :mod:`groundproxy.testing.fake_upstream_client` — ``FakeUpstream``, the same script and
  failure models in process: an ``Upstream`` (proxy.upstream.types) a test can hand to the
  proxy's code instead of the litellm client.
- :mod:`groundproxy.testing.clock` — ``FakeClock``, the serving path's clock moved by hand
  (``build_deps(settings).replace(clock=FakeClock(step=0.25))``).
- :mod:`groundproxy.testing.processes` — start and stop a real ``groundproxy serve`` process
  and the fake upstream from a test (free ports, readiness waits, clean shutdown).
"""
