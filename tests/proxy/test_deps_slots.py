"""Every part the guard uses is a slot of ``Deps`` and swapped through ``Deps.replace`` alone
(issue 39 item 2): the judge's client (sharing the upstream unless one is given), the
embedder, the verifier registry, the storage. The real app (lifespan, ONNX verifier, the
acme index) serves each request; only the slot under test is replaced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest
import structlog
import yaml

from groundproxy.models.registry import VerifierRegistry, models_dir_for
from groundproxy.policies.schema import UpstreamPolicy, local_policy
from groundproxy.proxy.app import build_app
from groundproxy.proxy.deps import Deps, build_deps
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import EmbeddedStorage
from groundproxy.proxy.upstream.client import UpstreamClient
from groundproxy.proxy.upstream.judge_client import MAX_JUDGE_BYTES, UpstreamJudge
from groundproxy.testing.fake_judge import FakeJudge, verdicts
from groundproxy.testing.fake_upstream_client import FakeUpstream
from tests.conftest import KEYS, _policy, share_index_files

QUESTION = [{"role": "user", "content": "How long is the warranty?"}]
WRONG = "The warranty lasts 24 months."
# the judge's JSON: the one claim contradicted, quoting the handbook (acme's index)
JUDGE_SAYS = verdicts(("c1", "contradicted", "12 months"))


def _settings(tmp_path: Path, data_dir: Path, **policy: Any) -> Settings:
    policies = tmp_path / "policies"
    policies.mkdir(exist_ok=True)
    pol = _policy("acme", 9, retrieval={"index": "acme"}, **policy)  # port 9: never used
    (policies / "acme.yaml").write_text(yaml.safe_dump(pol), encoding="utf-8")
    share_index_files(policies)
    return Settings(policies=policies, data=data_dir, watch_policies=False)


async def _ask(deps: Deps, settings: Settings) -> dict[str, Any]:
    structlog.reset_defaults()
    app = build_app(settings, deps)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            resp = await c.post(
                "/v1/chat/completions",
                json={"model": "gpt-4o-mini", "messages": QUESTION},
                headers={"authorization": f"Bearer {KEYS['acme']}"},
            )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()["groundproxy"]
    return body


async def test_a_fake_upstream_answers_the_judge_too(tmp_path: Path, data_dir: Path) -> None:
    """``deps.replace(upstream=fake)`` reaches the judge: the judge shares the upstream (it
    made a litellm client of its own, which called the policy's port 9 and failed)."""
    settings = _settings(tmp_path, data_dir, judge={"escalate": "all"})
    fake = FakeUpstream([
        {"match": "END OF DATA", "answer": JUDGE_SAYS},  # the judge's prompt
        {"match": "warranty", "answer": WRONG},
    ])  # fmt: skip
    got = await _ask(build_deps(settings).replace(upstream=fake), settings)
    judge_calls = [c for c in fake.calls if "END OF DATA" in c.messages[-1]["content"]]
    assert len(judge_calls) == 1 and len(fake.calls) == 2
    assert judge_calls[0].extra["temperature"] == 0  # the judge's call, through the fake
    assert got["judge"]["escalated"] == 1 and got["judge"]["skipped"] == 0
    assert got["claims"][0]["verdict"] == "contradicted"
    assert got["claims"][0]["judge"]["verdict"] == "contradicted"


class _CountingEmbedder:
    """The session's real embedder, counting the texts it encodes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, texts: Any) -> npt.NDArray[np.float32]:
        self.texts += len(texts)
        found: npt.NDArray[np.float32] = self.inner.encode(texts)
        return found


class _RecordingRegistry(VerifierRegistry):
    """The real registry, recording the names it was asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[str] = []

    def get(self, name: str) -> Any:
        self.asked.append(name)
        return super().get(name)


async def test_every_part_is_swapped_through_deps_alone(
    tmp_path: Path, data_dir: Path, embedder: Any
) -> None:
    """A fake judge, the embedder, the verifiers and the storage, each given to ``Deps``
    alone, are the ones the guard uses."""
    settings = _settings(tmp_path, data_dir, judge={"escalate": "all"})
    judge, counting = FakeJudge(JUDGE_SAYS), _CountingEmbedder(embedder)
    registry = _RecordingRegistry(models_dir_for(data_dir), embedder=embedder)
    deps = build_deps(settings).replace(
        upstream=FakeUpstream([{"match": "warranty", "answer": WRONG}]),
        judge=judge,
        embedder=counting,
        verifiers=registry,
    )
    got = await _ask(deps, settings)
    assert len(judge.calls) == 1 and got["judge"]["escalated"] == 1
    assert got["claims"][0]["judge"]["verdict"] == "contradicted"
    assert counting.texts > 0  # the claim, embedded to search acme's index
    assert local_policy("acme").verifier.model in registry.asked  # the policy's verifier
    assert deps.guard.parts.verifiers is registry and deps.guard.parts.raw_embedder is counting
    # the storage: an empty data folder has no acme index, so no evidence contradicts the claim
    empty = EmbeddedStorage(tmp_path / "empty")
    bare = build_deps(settings).replace(
        upstream=FakeUpstream([{"match": "warranty", "answer": WRONG}]), storage=empty
    )
    unsupported = await _ask(bare, settings)
    assert unsupported["claims"][0]["verdict"] == "unverifiable"
    assert got["claims"][0]["citations"] and not unsupported["claims"][0]["citations"]


@pytest.mark.parametrize("cap", [MAX_JUDGE_BYTES])
async def test_the_judge_shares_the_upstreams_connections_and_closes_with_it(cap: int) -> None:
    """The judge's client over ``Deps.upstream`` uses its direct-wire connection pool with the
    judge's own body cap; closing the upstream (``Deps.close``) closes the judge's too."""
    owner = UpstreamClient()
    judge = UpstreamJudge(owner)
    wire = UpstreamPolicy(model="openai/m", api_base="http://127.0.0.1:9/v1", transport="openai")
    shared = judge._client()
    assert isinstance(shared, UpstreamClient)
    mine, theirs = shared._wire(wire, "openai/m"), owner._wire(wire, "openai/m")
    assert mine is not None and theirs is not None
    assert mine._client is theirs._client  # one pool
    assert mine._max_body == cap and theirs._max_body is None  # the judge's cap, its own
    await shared.aclose()  # the judge's view leaves the pool to its owner
    assert not theirs._client.is_closed
    await owner.aclose()
    assert mine._client.is_closed
