"""``groundproxy models build`` on an NLI checkpoint, end to end: the real CLI exports a tiny
BertForSequenceClassification with optimum, quantizes it, and the registry, the guard and
the in-process API use the result (real ONNX files, no mocks)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from groundproxy.errors import ModelLoadError
from groundproxy.guards.types import Pair
from groundproxy.models.built_verifier import BuiltVerifier
from groundproxy.models.registry import VerifierRegistry, available
from groundproxy.proxy.cli.main import main
from groundproxy.retrieval.fsutil import sha256_file
from tests.conftest import KEYS, _policy
from tests.models.tiny_hf import save_tiny_nli

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

EVIDENCE = "The warranty of the Acme robot lasts 12 months from the date of purchase."
LONG_EVIDENCE = (
    " ".join(f"Paragraph {i} talks about the colour of the robot number {i}." for i in range(60))
    + " The warranty of the Acme robot lasts 12 months."
)
PAIRS = [
    Pair("The warranty lasts 12 months.", EVIDENCE),
    Pair("The warranty lasts 24 months.", EVIDENCE),
    Pair("The robot was designed in Paris by a large team of engineers.", EVIDENCE),
    Pair("The warranty lasts 12 months.", LONG_EVIDENCE),
    Pair("Braces {claim} and {evidence} are plain text.", "Short {evidence}."),
]


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


BUILD_OUTPUT: list[str] = []


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(source checkpoint, models dir holding 'tiny-nli') — built once by the real CLI;
    what it printed goes to BUILD_OUTPUT."""
    root = tmp_path_factory.mktemp("nli")
    src = save_tiny_nli(root / "ckpt")
    models = root / "models"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_cli(
            [
                "models",
                "build",
                "--from",
                str(src),
                "--name",
                "tiny-nli",
                "--models-dir",
                str(models),
            ]
        )
    assert code == 0
    BUILD_OUTPUT.append(out.getvalue())
    return src, models


def test_build_writes_the_documented_layout(built: tuple[Path, Path]) -> None:
    _, models = built
    out = models / "tiny-nli"
    meta = json.loads((out / "build.json").read_text())
    assert meta["kind"] == "nli"
    # id2label {0: contradiction, 1: entailment, 2: neutral} → our verdicts, by index
    assert meta["labels"] == {"0": "contradicted", "1": "supported", "2": "unverifiable"}
    assert meta["max_length"] == 128
    assert meta["pair_order"] == "evidence-claim"
    for f in ("model.onnx", "model.int8.onnx"):
        assert meta["sha256"][f] == sha256_file(out / f)
    assert (out / "tokenizer.json").is_file()
    assert (out / "model.int8.onnx").stat().st_size < (out / "model.onnx").stat().st_size
    parity = meta["parity"]
    assert parity["torch_vs_fp32_max_abs"] < 1e-4
    assert parity["int8_vs_fp32_max_abs"] < 0.05
    assert [p["expected"] for p in parity["probes"]] == [
        "supported",
        "contradicted",
        "unverifiable",
    ]
    assert not [p for p in models.iterdir() if p.name.startswith(".")]  # no leftovers


def test_cli_prints_files_parity_and_probes(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    src, models = built
    printed = BUILD_OUTPUT[0]
    assert "built 'tiny-nli' (nli, BertForSequenceClassification)" in printed
    assert "model.onnx" in printed and "model.int8.onnx" in printed
    assert "int8 vs fp32 max |Δp|" in printed
    assert printed.count("probe (") == 3
    assert "verifier: {model: tiny-nli}" in printed
    assert (
        run_cli(
            [
                "models",
                "build",
                "--from",
                str(src),
                "--name",
                "tiny-nli",
                "--models-dir",
                str(models),
            ]
        )
        == 2
    )  # exists, no --force
    assert "already exists" in capsys.readouterr().err
    assert run_cli(["models", "list", "--models-dir", str(models)]) == 0
    listing = capsys.readouterr().out
    assert "tiny-nli" in listing and "lexical" in listing


def test_registry_scores_with_the_mapping_of_id2label(built: tuple[Path, Path]) -> None:
    _, models = built
    assert "tiny-nli" in available(models)
    registry = VerifierRegistry(models)
    verifier = registry.get("tiny-nli")
    assert verifier.name == "tiny-nli"
    assert registry.get("tiny-nli") is verifier  # loaded once
    probs = verifier.score(PAIRS)
    assert len(probs) == len(PAIRS)
    for p in probs:
        values = [p.supported, p.contradicted, p.unverifiable]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert sum(values) == pytest.approx(1.0)
        assert 0.0 <= p.uncertainty() <= 1.0
        # the classifier bias ranks entailment > neutral > contradiction on every input
        assert p.supported > p.unverifiable > p.contradicted
    assert verifier.score([]) == []


def test_int8_matches_fp32_and_batching_changes_nothing(built: tuple[Path, Path]) -> None:
    _, models = built
    fp32 = VerifierRegistry(models).get("tiny-nli@fp32")
    int8 = BuiltVerifier(models / "tiny-nli", "int8")
    a = np.array([[p.supported, p.contradicted] for p in fp32.score(PAIRS)])
    one_by_one = np.array(
        [[p.supported, p.contradicted] for pair in PAIRS for p in fp32.score([pair])]
    )
    b = np.array([[p.supported, p.contradicted] for p in int8.score(PAIRS)])
    assert np.abs(a - one_by_one).max() < 1e-5  # padding is masked out
    assert np.abs(a - b).max() < 0.05


def test_unknown_name_lists_built_models(built: tuple[Path, Path]) -> None:
    _, models = built
    with pytest.raises(ModelLoadError, match="tiny-nli"):
        VerifierRegistry(models).get("no-such-model")


def test_tampered_model_is_a_load_error(built: tuple[Path, Path], tmp_path: Path) -> None:
    _, models = built
    copy = tmp_path / "tiny-nli"
    shutil.copytree(models / "tiny-nli", copy)
    target = copy / "model.int8.onnx"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="checksum"):
        VerifierRegistry(tmp_path).get("tiny-nli")


def test_failed_build_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = save_tiny_nli(tmp_path / "two", {0: "entailment", 1: "not_entailment"})
    models = tmp_path / "models"
    assert (
        run_cli(
            ["models", "build", "--from", str(src), "--name", "two", "--models-dir", str(models)]
        )
        == 2
    )
    assert "entailment, contradiction and neutral" in capsys.readouterr().err
    assert list(models.iterdir()) == []  # the temporary build folder is gone too
    assert (
        run_cli(
            [
                "models",
                "build",
                "--from",
                "no-such-org/no-such-model",
                "--name",
                "x",
                "--models-dir",
                str(models),
            ]
        )
        == 2
    )
    assert "local Hugging Face cache" in capsys.readouterr().err
    assert (
        run_cli(
            [
                "models",
                "build",
                "--from",
                str(src),
                "--name",
                "lexical",
                "--models-dir",
                str(models),
            ]
        )
        == 2
    )
    assert "built-in" in capsys.readouterr().err


async def test_policy_naming_the_built_model_guards_through_the_api(
    built: tuple[Path, Path], tmp_path: Path, upstream_port: int
) -> None:
    from groundproxy.proxy.app import build_app
    from groundproxy.proxy.settings import Settings

    _, models = built
    data = tmp_path / "data"
    shutil.copytree(models / "tiny-nli", data / "_models" / "tiny-nli")  # the default place
    policies = tmp_path / "policies"
    policies.mkdir()
    spec: dict[str, Any] = _policy("acme", upstream_port, verifier={"model": "tiny-nli"})
    (policies / "acme.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    app = build_app(Settings(policies=policies, data=data, watch_policies=False))
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "The team meeting is on Tuesday at 10:00 in room 4."},
            {"role": "user", "content": "context question: when is the meeting?"},
        ],
    }
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            resp = await c.post(
                "/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {KEYS['acme']}"},
            )
    assert resp.status_code == 200, resp.text
    gp = resp.json()["groundproxy"]
    assert gp["verifier"] == "tiny-nli"
    assert not gp["unverified"]
    assert gp["claims"] and all(0.0 <= c["uncertainty"] <= 1.0 for c in gp["claims"])


def test_hub_id_resolves_from_the_local_cache_only(
    built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    from groundproxy.models.build import resolve_source

    src, _ = built
    revision = "0" * 40
    repo = tmp_path / "hub" / "models--gp-test--tiny-nli"
    shutil.copytree(src, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    found = resolve_source("gp-test/tiny-nli")
    assert found.path == repo / "snapshots" / revision
    assert (found.path / "config.json").is_file()
