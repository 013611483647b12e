"""Issue 15, item 4 (a CLI that fits scripts and people), through the real CLI:
``python -m groundproxy.proxy check|serve|eval ...`` as subprocesses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groundproxy.models.registry import DEFAULT_VERIFIER
from groundproxy.policies.keys import hash_key
from groundproxy.testing.embedders import HASHING
from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.hardening.conftest import run_cli

# real CLI processes (about 80 s): `make test` runs them, `make fast` skips them
pytestmark = pytest.mark.slow

KETTLE = "The Zephyr kettle boils water in 45 seconds. It holds 1.7 litres of water."


def _policies(folder: Path, tenant: str = "t1") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{tenant}.yaml").write_text(
        f"tenant: {tenant}\n"
        f"keys: ['{hash_key('k-' + tenant)}']\n"
        "upstream: {model: openai/x, api_base: 'http://127.0.0.1:9/v1'}\n"
        "verifier: {model: lexical}\n",
        encoding="utf-8",
    )
    return folder


def _check(tmp_path: Path, answer: str, *flags: str) -> tuple[int, dict[str, Any], str]:
    done = run_cli(
        "check",
        "--data",
        str(tmp_path / "data"),
        "--policies",
        str(tmp_path / "policies"),
        "--tenant",
        "t1",
        "--answer",
        answer,
        *flags,
    )
    return done.returncode, json.loads(done.stdout), done.stderr


def test_check_prints_the_answer_and_fails_on_the_verdicts_asked(tmp_path: Path) -> None:
    _policies(tmp_path / "policies")
    (tmp_path / "kettle.md").write_text(KETTLE, encoding="utf-8")
    ingest = ("ingest", "--data", str(tmp_path / "data"), "--tenant", "t1", "--no-progress")
    assert run_cli(*ingest, str(tmp_path / "kettle.md")).returncode == 0

    code, body, err = _check(tmp_path, "The Zephyr kettle boils water in 45 seconds.")
    assert code == 0, err
    assert [c["verdict"] for c in body["claims"]] == ["supported"]
    answer = str(body["answer"])  # the text to return: here with its citation
    assert (
        answer.startswith("The Zephyr kettle boils water in 45 seconds [1].")
        and "kettle.md" in answer
    )
    assert body["action"] in err and "45 seconds" in err  # the human line
    code, _, err = _check(
        tmp_path, "The Zephyr kettle boils water in 45 seconds.", "--fail-on", "unverifiable"
    )
    assert code == 0, err

    made_up = "The Martian orbiter photographed seventeen volcanoes on Tuesday."
    code, body, err = _check(tmp_path, made_up)
    verdicts = {c["verdict"] for c in body["claims"]}
    assert code == 0 and "supported" not in verdicts, body
    assert isinstance(body["answer"], str) and body["answer"]
    code, _, _ = _check(tmp_path, made_up, "--fail-on", "unverifiable")
    assert code == 1
    code, _, _ = _check(tmp_path, made_up, "--fail-on", "contradicted")
    assert code == (1 if "contradicted" in verdicts else 0)


def _serve(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "groundproxy.proxy", "serve", "--data", str(tmp_path / "d"), *flags],
        env={**os.environ, "GROUNDPROXY_EMBEDDER": HASHING, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr


def test_serve_start_up_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    code, err = _serve(tmp_path, "--policies", str(tmp_path / "nowhere"))
    assert code == 2 and err.strip().count("\n") == 0, err
    assert err.startswith("groundproxy serve: error: ") and "nowhere" in err, err
    assert "Traceback" not in err

    policies = _policies(tmp_path / "policies")
    code, err = _serve(tmp_path, "--policies", str(policies), env={"GROUNDPROXY_EMBEDDER": "nope"})
    assert code == 2 and err.strip().count("\n") == 0 and "'nope'" in err, err
    assert err.startswith("groundproxy serve: error: unknown embedder")

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _serve(tmp_path, "--policies", str(policies), "--port", str(port))
    assert code == 2 and err.strip().count("\n") == 0 and str(port) in err, err
    assert err.startswith("groundproxy serve: error: cannot listen on"), err


def test_serve_warns_about_an_empty_index(tmp_path: Path) -> None:
    policies = _policies(tmp_path / "policies", "lonely")
    port = free_port()
    log = tmp_path / "proxy.log"
    env = {"GROUNDPROXY_EMBEDDER": HASHING}
    stop_process(start_proxy(port, policies, tmp_path / "data", env=env, log_path=log))
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    empty = [e for e in events if e.get("event") == "index_empty"]
    assert len(empty) == 1 and empty[0]["tenant"] == "lonely", events
    assert empty[0]["index"] == "lonely" and empty[0]["level"] == "warning"


@pytest.mark.parametrize("n", [8])
def test_eval_shows_progress_and_writes_rows_and_plots(tmp_path: Path, n: int) -> None:
    rows = [
        {
            "id": f"r{i}",
            "context": KETTLE,
            "query": "How fast does the kettle boil?",
            "response": (
                "The Zephyr kettle boils water in 45 seconds."
                if i % 2 == 0
                else "The Zephyr kettle is made of solid gold and sings opera."
            ),
            "label_hallucinated": i % 2,
        }
        for i in range(n)
    ]
    file = tmp_path / "tiny.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    done = run_cli("eval", str(file), "--verifier", "lexical", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"{n}/{n}" in done.stderr and "row" in done.stderr  # the tqdm bar, on stderr
    assert "tiny.jsonl" in done.stdout and "lexical" in done.stdout
    written = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in written] == [f"r{i}" for i in range(n)]
    assert [r["label"] for r in written] == [i % 2 for i in range(n)]
    assert all(set(r) == {"id", "label", "score", "prediction"} for r in written)
    assert all(0.0 <= r["score"] <= 1.0 and r["prediction"] in (0, 1) for r in written)
    for name in ("roc.png", "reliability.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_with_the_learned_decision_scores_by_the_combiner(tmp_path: Path) -> None:
    """``eval --decision learned``: rows are decided by the shipped answer combiner (the
    real embedhead, token alignment from the real MiniLM), its P(hallucinated) is the score;
    the lexical baseline still decides "every claim"."""
    answers = ("The Zephyr kettle boils water in 45 seconds.", "The Zephyr kettle sings opera.")
    rows = [
        {"id": f"r{i}", "context": KETTLE, "query": "How fast does the kettle boil?",
         "response": answers[i % 2], "label_hallucinated": i % 2}
        for i in range(4)
    ]  # fmt: skip
    file = tmp_path / "tiny.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    done = run_cli("eval", str(file), "--decision", "learned", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["decision"] == "learned" and result["verifier"] == DEFAULT_VERIFIER
    assert result["balanced_accuracy"] == 1.0 and result["roc_auc"] == 1.0
    written = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in written] == [0, 1, 0, 1]
    assert written[1]["score"] > written[0]["score"]
    assert result["baseline"]["verifier"] == "lexical"
