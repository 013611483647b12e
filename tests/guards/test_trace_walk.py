"""The walk-back that names the error stage of a multi-step trace (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from groundproxy.guards.verdict.trace_walk import TraceClaim, TraceNode, final_step, walk_back

TOPICS = ("warehouse", "revenue", "costs", "moon")


def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Topic one-hot vectors: like a sentence embedder, blind to the numbers."""
    out = np.zeros((len(texts), len(TOPICS)), dtype=np.float32)
    for i, t in enumerate(texts):
        out[i, next(j for j, w in enumerate(TOPICS) if w in t)] = 1.0
    return out


def node(
    sid: str,
    parents: tuple[str, ...],
    *claims: tuple[str, str],
    t: float = 0.0,
    outputs: tuple[TraceClaim, ...] | None = None,
) -> TraceNode:
    return TraceNode(
        sid, parents, tuple(TraceClaim(c, v, f"{v} at {sid}") for c, v in claims), t, outputs
    )


def dag(step2: str, step3: str, final_verdict: str) -> dict[str, TraceNode]:
    return {
        "s1": node("s1", (), ("warehouse 120", "supported"), t=1),
        "s2": node(
            "s2", (), (f"revenue {step2}", "supported" if step2 == "40" else "contradicted"), t=2
        ),
        "s3": node(
            "s3",
            ("s1", "s2"),
            ("warehouse 120", "supported"),
            (f"revenue {step3}", final_verdict),
            t=3,
        ),
    }


def test_error_introduced_in_step_2_and_copied() -> None:
    nodes = dag("45", "45", "supported")
    assert final_step(nodes, list(nodes)) == "s3"
    [u] = walk_back(nodes, "s3", embed)
    assert (u.claim, u.error_step, u.verdict, u.final_verdict) == (
        "revenue 45",
        "s2",
        "contradicted",
        "supported",
    )
    assert u.path == ("s3", "s2") and "contradicted at s2" in u.explanation


def test_error_in_step_2_also_flagged_by_the_final_step() -> None:
    [u] = walk_back(dag("45", "45", "contradicted"), "s3", embed)
    assert u.error_step == "s2"


def test_error_introduced_by_the_final_step() -> None:
    [u] = walk_back(dag("40", "45", "contradicted"), "s3", embed)
    assert u.error_step == "s3" and u.path == ("s3",)


def test_all_grounded() -> None:
    assert walk_back(dag("40", "40", "supported"), "s3", embed) == []


def test_new_unsupported_content_at_the_final_step() -> None:
    nodes = dag("40", "40", "supported")
    s3 = nodes["s3"]
    nodes["s3"] = TraceNode(
        "s3", s3.parents, (*s3.claims, TraceClaim("moon cheese", "unverifiable")), 3
    )
    [u] = walk_back(nodes, "s3", embed)
    assert u.claim == "moon cheese" and u.error_step == "s3"


def test_a_corrected_parent_passes_on_the_correction() -> None:
    nodes = dag("45", "45", "contradicted")
    s2 = nodes["s2"]
    nodes["s2"] = TraceNode(
        "s2", (), s2.claims, 2, outputs=(TraceClaim("revenue 40", "supported"),)
    )
    [u] = walk_back(nodes, "s3", embed)
    assert u.error_step == "s3"


def test_missing_parents_and_unknown_final() -> None:
    nodes = {"s3": node("s3", ("gone",), ("revenue 45", "contradicted"))}
    assert [u.error_step for u in walk_back(nodes, "s3", embed)] == ["s3"]
    assert walk_back(nodes, "nope", embed) == []
    assert final_step({}, ["x"]) is None
