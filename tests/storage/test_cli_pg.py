"""``groundproxy check`` and ``groundproxy calibrate`` (real CLI processes) read and write
the storage the server uses: with GROUNDPROXY_DATABASE_URL set, ``check`` verifies against
the tenant's index in PostgreSQL and ``calibrate`` writes the calibration there, nothing
under ``--data``."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from groundproxy.policies.keys import hash_key
from tests.hardening.conftest import run_cli

pytestmark = pytest.mark.slow

KETTLE = "The Zephyr kettle boils water in 45 seconds. It holds 1.7 litres of water."
CLAIM = "The Zephyr kettle boils water in 45 seconds."


def _policies(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t1.yaml").write_text(
        f"tenant: t1\nkeys: ['{hash_key('k-t1')}']\n"
        "upstream: {model: openai/x, api_base: 'http://127.0.0.1:9/v1'}\n"
        "verifier: {model: lexical}\n",
        encoding="utf-8",
    )
    return folder


def _rows(path: Path, gold_doc: str | None = None) -> Path:
    """Labelled rows; without ``gold_doc`` retrieval is calibrated on the rows' own
    contexts, with it on the tenant's index (in Postgres here)."""
    rows = []
    for i in range(24):
        bad = i % 3 == 0
        response = f"The Zephyr kettle boils water in {90 + i if bad else 45} seconds."
        rows.append(
            {
                "context": KETTLE,
                "query": "How fast does the Zephyr kettle boil water?",
                "response": response,
                "label_hallucinated": int(bad),
                **({"gold_doc": gold_doc} if gold_doc else {}),
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def test_check_and_calibrate_use_postgres(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policies, data = _policies(tmp_path / "policies"), tmp_path / "data"
    (tmp_path / "kettle.md").write_text(KETTLE, encoding="utf-8")
    folders = ("--data", str(data), "--policies", str(policies))
    check = ("check", *folders, "--tenant", "t1", "--answer", CLAIM)
    # embedded (no URL): nothing ingested there, so the claim finds no evidence
    done = run_cli(*check, timeout=900)
    assert done.returncode == 0, done.stderr
    assert [c["verdict"] for c in json.loads(done.stdout)["claims"]] != ["supported"]

    monkeypatch.setenv("GROUNDPROXY_DATABASE_URL", pg_dsn)
    ingest = ("ingest", "--data", str(data), "--tenant", "t1", "--no-progress")
    assert run_cli(*ingest, str(tmp_path / "kettle.md"), timeout=900).returncode == 0
    done = run_cli(*check, timeout=900)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [c["verdict"] for c in body["claims"]] == ["supported"]
    assert "kettle.md" in str(body["answer"])

    rows = _rows(tmp_path / "rows.jsonl")
    calibrate = ("calibrate", *folders, "--tenant", "t1", str(rows))
    done = run_cli(*calibrate, "--alpha", "0.2", "--json", timeout=900)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "gp_calibration" in result["path"]  # written where every replica reads it
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT content FROM gp_calibration WHERE tenant = 't1'").fetchone()
    assert row is not None and row[0]["alpha"] == 0.2 and row[0]["rows"] == 24
    assert not list(data.rglob("calibration.json")) and not list(data.rglob("*.sqlite"))

    # rows naming their gold document: retrieval calibrated on the tenant's Postgres index
    gold = _rows(tmp_path / "gold.jsonl", gold_doc="kettle.md")
    done = run_cli("calibrate", *folders, "--tenant", "t1", str(gold), "--alpha", "0.2",
                   "--json", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    retrieval = result["retrieval"]
    assert "gold_doc" in retrieval["source"]
    assert retrieval["held_out"]["recall_at_k"] == 1.0


def test_fit_verifies_labels_against_the_postgres_index(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``calibrate --fit`` scores the labels the way the server would: labels without
    context find their evidence in the tenant's PostgreSQL index (none under ``--data``)."""
    policies, data = _policies(tmp_path / "policies"), tmp_path / "data"
    (tmp_path / "kettle.md").write_text(KETTLE, encoding="utf-8")
    monkeypatch.setenv("GROUNDPROXY_DATABASE_URL", pg_dsn)
    ingest = ("ingest", "--data", str(data), "--tenant", "t1", "--no-progress")
    assert run_cli(*ingest, str(tmp_path / "kettle.md"), timeout=900).returncode == 0
    rows = [
        {"response": f"The Zephyr kettle boils water in {90 + i if i % 2 else 45} seconds.",
         "query": "How fast does the Zephyr kettle boil water?", "label_hallucinated": i % 2}
        for i in range(20)
    ]  # fmt: skip
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    fit = ("calibrate", "--fit", "--data", str(data), "--policies", str(policies))
    done = run_cli(*fit, "--tenant", "t1", str(labels), "--json", timeout=900)
    assert done.returncode == 0, done.stderr
    content = json.loads(done.stdout.strip().splitlines()[-1])
    # the right answers were supported by the indexed document: the zero-shot rule on the
    # same answers separates them (with no index found every claim is unverifiable: 0.5)
    assert content["fit"]["zero_shot_balanced_accuracy"] == 1.0
