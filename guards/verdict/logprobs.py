"""The upstream's token logprobs as a signal: how sure the model was of each claim's words.

When the application asks the upstream for ``logprobs`` (OpenAI chat ``logprobs: true``;
legacy completions ``logprobs: N``), the answer arrives with one log-probability per
generated token. A model that made a value up often hesitates on it: the claim's lowest
token logprob is lower. Per claim: the mean and the minimum logprob of the tokens that
overlap the claim's span in the answer. They are a signal for a tenant's adapter
(:mod:`groundproxy.guards.adapter.features` ``LOGPROB_FEATURES``), read only when the adapter
in force was fitted on labelled answers that carried them.

Pure logic over plain data: :func:`parse_logprobs` reads the OpenAI shapes, and
:func:`claim_logprobs` aligns the tokens with the answer by their text (the tokens joined
must contain the verified answer; otherwise there is no signal).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from groundproxy.guards.verdict.stages import Verified

TokenLogprob = tuple[str, float]
FLOOR = -30.0  # some upstreams send -9999 for a token they forced: clamp
MAX_TOKENS = 100_000


def _entry(item: Any) -> TokenLogprob | None:
    if not isinstance(item, Mapping):
        return None
    token, lp = item.get("token"), item.get("logprob")
    if not isinstance(token, str) or not isinstance(lp, int | float) or isinstance(lp, bool):
        return None
    value = float(lp)
    if math.isnan(value) or value > 0.0:
        return None
    return token, max(FLOOR, value)


def parse_logprobs(raw: Any) -> tuple[TokenLogprob, ...] | None:
    """``(token, logprob)`` pairs from a chat choice's ``logprobs`` (``{"content": [{"token",
    "logprob", …}]}``), a bare list of such entries, or a legacy completions choice's
    (``{"tokens": [...], "token_logprobs": [...]}``); None when there are none or an entry
    is malformed (no partial signal)."""
    if isinstance(raw, Mapping) and isinstance(raw.get("tokens"), list):
        tokens, lps = raw["tokens"], raw.get("token_logprobs")
        if not isinstance(lps, list) or len(lps) != len(tokens):
            return None
        raw = [{"token": t, "logprob": lp} for t, lp in zip(tokens, lps, strict=True)]
    elif isinstance(raw, Mapping):
        raw = raw.get("content")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_TOKENS:
        return None
    out = [_entry(item) for item in raw]
    if any(e is None for e in out):
        return None
    return tuple(e for e in out if e is not None)


def claim_logprobs(
    answer: str, spans: Sequence[tuple[int, int]], tokens: Sequence[TokenLogprob]
) -> list[tuple[float, float]] | None:
    """``(mean, min)`` logprob of the tokens overlapping each span of ``answer``; None when
    the tokens do not spell the answer. A span no token overlaps reads the whole answer's."""
    joined = "".join(t for t, _ in tokens)
    at = joined.find(answer) if answer else -1
    if at < 0:
        return None
    placed: list[tuple[int, int, float]] = []
    pos = 0
    for text, lp in tokens:
        end = pos + len(text)
        if end > at and pos < at + len(answer) and text.strip():
            placed.append((pos - at, end - at, lp))
        pos = end
    if not placed:
        return None
    whole = [lp for _, _, lp in placed]
    overall = (sum(whole) / len(whole), min(whole))
    out: list[tuple[float, float]] = []
    for start, end in spans:
        lps = [lp for s, e, lp in placed if s < end and start < e]
        out.append((sum(lps) / len(lps), min(lps)) if lps else overall)
    return out


def verified_logprobs(verified: Verified, raw: Any) -> list[tuple[float, float]] | None:
    """Each verified claim's ``(mean, min)`` upstream logprob from a choice's ``logprobs``
    as sent (:func:`parse_logprobs`, read only here: only an adapter that uses them pays
    for it); None without them or when the tokens do not spell the verified answer."""
    tokens = parse_logprobs(raw) if raw else None
    if not tokens:
        return None
    return claim_logprobs(verified.answer, [s.claim.span for s in verified.claims], tokens)
