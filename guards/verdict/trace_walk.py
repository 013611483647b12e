"""Error localization in a multi-step generation DAG (VeriTrail, seed 002) — pure logic.

A trace is a DAG of guarded generations (nodes). A node's parents are the earlier steps
whose outputs it was given as input; a node without parents hangs off the roots (the
tenant's documents and its own request context). Every node was guarded when it was
generated, so each of its claims already carries the verdict *of that step's own inputs*
(its request context — which holds the parents' outputs — and the tenant's index).

Walk-back for one claim ``c`` of the final node ``N``:

1. Among ``N``'s parents, the *carrier* is the parent claim nearest to ``c`` by embedding
   cosine, when that cosine is ≥ ``threshold`` (the parent's output already contains it).
   A parent's output is what it returned: when the proxy corrected a claim, the child got
   the correction (supported), and a removed claim never reached it.
2. If ``c`` is not supported at ``N``:
   - no carrier, or a carrier that its own step supported → ``N`` introduced the
     unsupported content (it added or distorted it): ``N`` is the error step;
   - a carrier that its own step did not support either → the content came from there:
     continue at the carrier.
3. If ``c`` is supported at ``N``:
   - no carrier → ``N``'s support came from the roots: the claim is grounded;
   - a carrier → continue at the carrier (an intermediate can faithfully pass on
     something an earlier step made up; only the earliest step shows it).

The result, for each final claim with an error step, says which step, its verdict there
and why — the error stage. Claims that walk back to grounded content are not reported.
Embedding similarity cannot tell "40 million" from "45 million"; that is why the verdicts
(which apply the number rules against each step's own inputs) decide, and the embedding
only finds the carrier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MATCH_THRESHOLD = 0.8
MAX_DEPTH = 256


@dataclass(frozen=True)
class TraceClaim:
    text: str
    verdict: str
    explanation: str = ""
    support: float = 0.0


@dataclass(frozen=True)
class TraceNode:
    """``claims``: the step's upstream answer as guarded; ``outputs``: the claims of the text
    the step returned (a corrected claim as its correction, removed or blocked claims gone),
    i.e. what a child step received. ``outputs`` None means the same as ``claims``."""

    step_id: str
    parents: tuple[str, ...]
    claims: tuple[TraceClaim, ...]
    created: float = 0.0
    outputs: tuple[TraceClaim, ...] | None = None

    @property
    def passed_on(self) -> tuple[TraceClaim, ...]:
        return self.claims if self.outputs is None else self.outputs


@dataclass(frozen=True)
class Unsupported:
    """A final claim whose content is not grounded, and the step that introduced it."""

    claim: str
    verdict: str  # the verdict at the error step (against that step's own inputs)
    error_step: str
    explanation: str
    final_verdict: str  # the verdict at the final step
    path: tuple[str, ...]  # step ids from the final step back to the error step


def final_step(nodes: Mapping[str, TraceNode], trace_steps: Sequence[str]) -> str | None:
    """The final step among ``trace_steps``: no child in ``nodes``; the latest if several."""
    children = {p for n in nodes.values() for p in n.parents}
    leaves = [s for s in trace_steps if s in nodes and s not in children]
    pool = leaves or [s for s in trace_steps if s in nodes]
    if not pool:
        return None
    return max(pool, key=lambda s: (nodes[s].created, s))


def _carrier(
    vec: npt.NDArray[np.float32],
    node: TraceNode,
    nodes: Mapping[str, TraceNode],
    vectors: Mapping[str, npt.NDArray[np.float32]],
    visited: set[str],
    threshold: float,
) -> tuple[TraceNode, TraceClaim, float] | None:
    best: tuple[TraceNode, TraceClaim, float] | None = None
    for pid in node.parents:
        parent = nodes.get(pid)
        if parent is None or pid in visited:
            continue
        for pc in parent.passed_on:
            cos = float(np.dot(vec, vectors[pc.text]))
            if cos >= threshold and (best is None or cos > best[2]):
                best = (parent, pc, cos)
    return best


def _explain(step: TraceNode, claim: TraceClaim, path: Sequence[str]) -> str:
    where = (
        "a first step (no parent steps): its inputs are the tenant's documents and its "
        "request context"
        if not step.parents
        else "its inputs (the parent steps' outputs, its request context and the tenant's "
        "documents)"
    )
    how = " → ".join(path)
    reason = claim.explanation or claim.verdict
    return f"introduced at step {step.step_id} ({where}) — {reason}; walked back {how}"


def walk_back(
    nodes: Mapping[str, TraceNode],
    final: str,
    embed: Callable[[Sequence[str]], npt.NDArray[np.float32]],
    threshold: float = MATCH_THRESHOLD,
) -> list[Unsupported]:
    """The final step's claims that trace back to an error step (module docstring).

    ``embed`` returns L2-normalized vectors (one row per text); it is called once, on the
    distinct claim texts of all nodes.
    """
    start = nodes.get(final)
    if start is None or not start.claims:
        return []
    texts = sorted({c.text for n in nodes.values() for c in (*n.claims, *n.passed_on)})
    matrix = embed(texts)
    vectors = {t: np.asarray(matrix[i], dtype=np.float32) for i, t in enumerate(texts)}
    out: list[Unsupported] = []
    for claim in start.claims:
        node, cur = start, claim
        path = [start.step_id]
        visited = {start.step_id}
        error: tuple[TraceNode, TraceClaim] | None = None
        for _ in range(MAX_DEPTH):
            found = _carrier(vectors[cur.text], node, nodes, vectors, visited, threshold)
            if cur.verdict != "supported":
                if found is None or found[1].verdict == "supported":
                    error = (node, cur)
                    break
            elif found is None:
                break  # grounded at this step's own inputs (the roots)
            node, cur = found[0], found[1]
            visited.add(node.step_id)
            path.append(node.step_id)
        if error is not None:
            step, at = error
            out.append(
                Unsupported(
                    claim=claim.text,
                    verdict=at.verdict,
                    error_step=step.step_id,
                    explanation=_explain(step, at, path),
                    final_verdict=claim.verdict,
                    path=tuple(path),
                )
            )
    return out
