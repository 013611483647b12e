"""Seeded fuzz cases of a judge's HTTP replies, as rules of a scripted judge process
(``groundproxy.testing.fake_upstream``): ``answer`` is the message content of a well-formed
completion, ``body`` the whole 200 body sent verbatim. Shapes, sizes, ids, quotes, value
types, non-JSON and huge replies (tests/e2e/test_judge_limits_e2e.py)."""

from __future__ import annotations

import json
import random
from typing import Any

QUOTE = "limited warranty of 12 months from the date of purchase"
SECRET_REASON = "Authorization: Bearer sk-proj-Fuzz0123456789abcdefXYZ was sent to me"


def _claim(rng: random.Random) -> dict[str, Any]:
    ids: list[Any] = ["c1", "c1", "c1", "C1", "c2", "", None, 1, ["c1"], {"id": "c1"}]
    verdicts: list[Any] = [
        "supported", "contradicted", "unverifiable", "SUPPORTED", "", None, 3, ["supported"],
    ]  # fmt: skip
    quotes: list[Any] = [
        QUOTE, QUOTE, f"“{QUOTE}”", f'"{QUOTE}"', "12 months", "", None, 12, "x" * 50_000,
        "The warranty lasts 12 months.", "warranty \u0000 of 12 months", "😀" * 300,
    ]  # fmt: skip
    reasons: list[Any] = ["fine", "", None, 7, "r" * 20_000, SECRET_REASON, {"why": "nested"}]
    claim = {
        "id": rng.choice(ids),
        "verdict": rng.choice(verdicts),
        "quote": rng.choice(quotes),
        "reason": rng.choice(reasons),
    }
    if rng.random() < 0.2:
        del claim[rng.choice(list(claim))]
    return claim


def _content(rng: random.Random) -> str:
    """A message content: JSON of many shapes, or not JSON at all."""
    kind = rng.randrange(12)
    if kind < 4:
        return json.dumps({"claims": [_claim(rng) for _ in range(rng.randrange(1, 4))]})
    shapes: list[Any] = [
        {"claims": {"c1": "supported"}}, {"claims": "supported"}, {"claims": None},
        {"claims": [1, "two", None, []]}, [{"id": "c1", "verdict": "supported"}], "supported",
        42, None, {"verdicts": [{"id": "c1", "verdict": "supported", "quote": QUOTE}]},
        {"claims": [{"id": "c1", "verdict": "supported", "quote": QUOTE}] * 500},
    ]  # fmt: skip
    if kind < 7:
        return json.dumps(rng.choice(shapes))
    texts = [
        "Sure! Every claim looks supported to me.",
        f'```json\n{{"claims": [{{"id": "c1", "verdict": "supported", "quote": "{QUOTE}"}}]}}\n```',
        "{'claims': [{'id': 'c1', 'verdict': 'supported'}]}",
        '{"claims": [{"id": "c1", "verdict": "supp',
        "NaN",
        "[" * 20_000 + "]" * 20_000,
        json.dumps({"claims": [{"id": "c1", "verdict": "supported", "quote": QUOTE}]})
        + " trailing",
        "",
    ]
    if kind < 11:
        return rng.choice(texts)
    reason = "r" * 1_200_000  # over the judge's cap
    return json.dumps({"claims": [{"id": "c1", "verdict": "supported", "quote": QUOTE,
                                   "reason": reason}]})  # fmt: skip


def _completion(content: Any, **extra: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {
        "id": "chatcmpl-fuzz", "object": "chat.completion", "created": 0, "model": "judge",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], **extra,
    }  # fmt: skip


def _body(rng: random.Random) -> Any:
    """A whole 200 body of an odd shape (a JSON value, or a string sent verbatim)."""
    good = json.dumps({"claims": [{"id": "c1", "verdict": "supported", "quote": QUOTE}]})
    bodies: list[Any] = [
        "<html><body>502 Bad Gateway</body></html>", [], {}, {"choices": []},
        {"choices": "none"}, {"choices": [{"index": 0}]}, _completion(None), _completion(5),
        _completion([{"type": "text", "text": good}]), _completion({"text": good}),
        {"error": {"message": "overloaded", "type": "server_error"}}, "NaN", '{"choices": [',
        _completion(good, padding="p" * 1_500_000),  # a valid verdict in a 1.5 MB body
        _completion(good, usage="lots"),
    ]  # fmt: skip
    return rng.choice(bodies)


def fuzz_rules(count: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` cases: (the case's tag in the claim, the judge rule's reply fields)."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        reply = {"answer": _content(rng)} if rng.random() < 0.6 else {"body": _body(rng)}
        out.append((f"case {n:03d} holds", reply))
    return out
