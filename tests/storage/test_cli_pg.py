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
from groundproxy.proxy.storage.backends import PostgresStorage
from groundproxy.proxy.storage.feedback import parse_labelled
from groundproxy.proxy.storage.pg_adapt import PgAdapterCache
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


def test_fit_reads_labels_and_writes_the_adapter_in_postgres(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``calibrate --fit`` on PostgreSQL: the labels the replicas stored in ``gp_feedback``,
    scored the way the server would (labels without context find their evidence in the
    tenant's PostgreSQL index), the adapter stored in ``gp_adapters`` — nothing under
    ``--data``."""
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
    # the labels as reviewers post them (POST /v1/groundproxy/feedback): into gp_feedback
    storage = PostgresStorage(pg_dsn)
    storage.start()
    try:
        counts = [storage.append_feedback("t1", parse_labelled(r))[1] for r in rows]
        assert counts[-1] == 20 and storage.read_feedback("t2") == []  # per tenant
        fit = ("calibrate", "--fit", "--data", str(data), "--policies", str(policies))
        done = run_cli(*fit, "--tenant", "t1", "--json", timeout=900)
        assert done.returncode == 0, done.stderr
        content = json.loads(done.stdout.strip().splitlines()[-1])
        # the right answers were supported by the indexed document: the zero-shot rule on
        # the same answers separates them (with no index found every claim is
        # unverifiable: 0.5)
        assert content["fit"]["n"] == 20
        assert content["fit"]["zero_shot_balanced_accuracy"] == 1.0
        # the adapter went where every replica reads it, nothing under --data
        assert content["version"] == 1 and "gp_adapters" in content["path"]
        # the zero-shot rule already separates these labels (1.0), so the fit keeps it (labels
        # that always help): a zero-shot record, read back by every replica as no adapter
        assert content["decision"] == "zero_shot" and content["fit"]["kept"] == "zero_shot"
        assert storage.adapters().get("t1") is None
        assert storage.adapters().get("t2") is None
        assert not list(data.rglob("adapter*.json")) and not list(data.rglob("feedback.jsonl"))
        done = run_cli(*fit, "--tenant", "t1", "--json", timeout=900)  # the next version
        assert json.loads(done.stdout.strip().splitlines()[-1])["version"] == 2
        replica = PgAdapterCache(storage.pool, ttl_s=0)
        assert replica.get("t1") is None  # still zero-shot
        # ... and every replica reads what the record proves (it gates the judge)
        proof = replica.zero_shot_for("t1", content["verifier"])
        assert proof is not None and proof.version == 2 and proof.n == 20
        assert proof.balanced_accuracy == 1.0
        assert replica.zero_shot_for("t1", "another-verifier") is None
        assert replica.zero_shot_for("t2", content["verifier"]) is None
    finally:
        storage.close()
