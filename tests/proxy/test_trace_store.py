"""The per-tenant trace store: bounded by retention and max_nodes; never inside an index
generation; digests, not raw context."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from groundproxy.guards.types import Claim, ClaimResult, GuardReport, Probs
from groundproxy.policies.schema import TracesPolicy
from groundproxy.proxy.storage.sqlite_traces import TraceStep, TraceStores


def report(text: str) -> GuardReport:
    r = ClaimResult(Claim(text, (0, len(text))), "supported", Probs(0.9, 0.05, 0.05), 0.3)
    return GuardReport(text, text, [r], trust=0.9, action="none")


def test_retention_and_max_nodes(tmp_path: Path) -> None:
    stores = TraceStores(tmp_path)
    store = stores.get("acme")
    assert store.path == tmp_path / "acme" / "traces.sqlite"
    settings = TracesPolicy(retention_hours=1.0, max_nodes=3)
    now = 1_000_000.0
    for i in range(5):
        store.record(
            TraceStep(
                step_id=f"st_{i:016x}",
                trace_id="t",
                parents=[],
                request_id="r",
                policy_id="acme@1",
                question="q?",
                context=[("user", "secret ctx")],
            ),
            report=report(f"claim {i}."),
            settings=settings,
            now=now + i,
        )
    assert store.prune(settings, now=now + 5) == 2
    assert store.count() == 3
    own, nodes = store.trace("t", not_before=0.0)
    assert own == [f"st_{i:016x}" for i in (2, 3, 4)]
    # Past retention a node is invisible at once, and gone after the next prune.
    own, _ = store.trace("t", not_before=now + 3.5)
    assert own == ["st_0000000000000004"]
    assert store.prune(settings, now=now + 3600 + 3.5) == 2
    stores.close()
    raw = (
        sqlite3.connect(tmp_path / "acme" / "traces.sqlite")
        .execute("SELECT group_concat(context_sha256) || group_concat(question_sha256) FROM nodes")
        .fetchone()[0]
    )
    assert "secret" not in raw and len(nodes["st_0000000000000004"].context_sha256) == 64


def test_step_without_trace_joins_first_parent(tmp_path: Path) -> None:
    store = TraceStores(tmp_path).get("acme")
    s = TracesPolicy()
    assert (
        store.record(
            TraceStep(
                step_id="st_" + "a" * 16,
                trace_id=None,
                parents=[],
                request_id="",
                policy_id="p",
                question=None,
                context=[],
            ),
            report=report("x."),
            settings=s,
        )
        == "st_" + "a" * 16
    )
    assert (
        store.record(
            TraceStep(
                step_id="st_" + "b" * 16,
                trace_id=None,
                parents=["st_" + "a" * 16],
                request_id="",
                policy_id="p",
                question=None,
                context=[],
            ),
            report=report("y."),
            settings=s,
        )
        == "st_" + "a" * 16
    )
    assert store.missing(["st_" + "a" * 16, "st_" + "c" * 16], 0.0) == ["st_" + "c" * 16]
