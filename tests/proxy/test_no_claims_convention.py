"""One convention for an answer with no claims (issue 42 item 6): the served path returns it
untouched with trust 1.0, so it is not hallucinated — in ``groundproxy eval``, in the signals
``calibrate --fit``, ``bench.kshot`` and ``bench.judge`` read (they said hallucinated), and in
their cached rows from before."""

from __future__ import annotations

import json
from pathlib import Path

from bench.kshot import extract
from groundproxy.proxy.cli.evaluate import eval_policy, read_rows, score_rows
from groundproxy.proxy.offline import signals_of
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.feedback import parse_labelled

GREETING = {"id": "g1", "context": "The warranty is 12 months.", "query": "Hi",
            "response": "Hello! How can I help?", "label_hallucinated": 0}  # fmt: skip
WRONG = {**GREETING, "id": "w1", "query": "How long is the warranty?",
         "response": "The warranty is 48 months.", "label_hallucinated": 1}  # fmt: skip


def test_an_answer_without_claims_is_not_hallucinated_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (GREETING, WRONG)), encoding="utf-8")
    policy = eval_policy("default", "context")
    with build_guard(Settings(data=tmp_path / "data", batch_window_ms=0)) as guard:
        answer, context = str(GREETING["response"]), str(GREETING["context"])
        served = guard.guard_sync(
            answer, "Hi", [("context", context)], policy, index=None, cache=False
        )
        assert served.claims == [] and served.trust == 1.0 and served.action == "none"
        per_row: list[dict[str, object]] = []
        score_rows(read_rows(path), policy, guard, None, per_row=per_row)
        signals, zero = signals_of(parse_labelled(GREETING), policy, guard)
        _, zero_wrong = signals_of(parse_labelled(WRONG), policy, guard)
        _, scored, _ = extract(path, 2, lambda: guard, tmp_path / "cache")
    assert [r["prediction"] for r in per_row] == [0, 1]  # groundproxy eval
    assert signals["claims"] == [] and zero == 0 and zero_wrong == 1  # calibrate --fit
    by_claims = sorted((len(s["signals"]["claims"]), s["zero"]) for s in scored)
    assert by_claims[0] == (0, 0) and by_claims[1][1] == 1  # bench.kshot / bench.judge


def test_rows_cached_before_read_as_served(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(GREETING) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"
    with build_guard(Settings(data=tmp_path / "data", batch_window_ms=0)) as guard:
        extract(path, 1, lambda: guard, cache)
    (where,) = cache.glob("*.json")
    saved = json.loads(where.read_text(encoding="utf-8"))
    saved["rows"][0]["zero"] = 1  # as the old convention cached it
    where.write_text(json.dumps(saved), encoding="utf-8")
    _, scored, _ = extract(path, 1, None, cache)
    assert scored[0]["zero"] == 0
