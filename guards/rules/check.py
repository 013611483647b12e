"""Symbolic checks of one claim against its evidence texts (best evidence first).

- ``numbers_need_evidence``: every quantity of the claim (number, amount, percentage,
  year, date) must appear in some evidence with the same value and a compatible unit;
  otherwise it is *missing* ("claim states 24 months; no evidence states it").
- Quantities are compared after unit conversion (:mod:`guards.rules.quantities`: "12 months"
  = "1 year" = "one year", "1k" = "1,000" = "one thousand").
- Value mismatch (always checked): for a quantity no evidence states, the first evidence
  (in rank order) holding a different value with the same unit or noun, near a word the
  claim also uses near its value, gives a *mismatch* and a *correction* — the claim with
  the evidence's value substituted ("evidence states 12 months, claim states 24 months");
  a bound before the value goes with it ("more than 30,000" → "30,621", guards.rules.approx).
  The shared nearby word keeps "won the award in 1980" from being "corrected" by
  "was born in 1950"; and the evidence sentence must hold at least half of the claim's
  content words (it must speak of the same thing), else there is no correction.
- Polarity (:mod:`guards.rules.polarity`): evidence states a value only where it asserts it as
  the claim does; a value the evidence mentions only to deny it ("It was never 10
  years", "Rumours that … 10 years are false") is a *mismatch* with no correction
  ("evidence denies 10 years") unless another value of the same slot gives one; a value
  it only quotes, asks about or instructs to say is neither support nor contradiction. A
  correction's value must be asserted too, and a value the claim denies ("not 24
  months") is never corrected.
- Same slot (:mod:`guards.rules.slots`): a correction comes only from an evidence clause about
  the same item and attribute as the claim's ("Repairs … 90 days" is not corrected by
  "return … within 30 days"); when unsure, no correction (the claim is flagged).
- Framing (:mod:`guards.rules.framing`): a passage whose sentence covering the claim only
  denies it ("The robot is not waterproof", "Rumours that … are false"), quotes, asks or
  instructs it supports nothing (``hollow``); when no passage asserts the claim and one
  denies it, that is a *mismatch* with no correction ("evidence denies it").
- ``entities_need_evidence``: every named-entity phrase of the claim must be mentioned
  by some evidence (case-insensitive, possessive "'s" ignored); otherwise *missing*.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from groundproxy.guards.rules.approx import bound_of
from groundproxy.guards.rules.entities import identifiers, mentions, named_entities, names_all
from groundproxy.guards.rules.framing import frame
from groundproxy.guards.rules.periods import PERIOD_ADVERBS
from groundproxy.guards.rules.polarity import Stance, denied, stance
from groundproxy.guards.rules.quantities import Quantity, extract_quantities
from groundproxy.guards.rules.scope import scoped
from groundproxy.guards.rules.slots import same_slot
from groundproxy.guards.rules.units import UNITS
from groundproxy.policies.schema import RulesPolicy

QUANTITY_CACHE = 4096  # texts whose quantities are kept (frozen Quantity tuples)

NEAR_WORDS = 5  # content words looked at on each side of a value
ALIGN_RECALL = 0.5  # share of the claim's content words the evidence sentence must hold
_WORD = re.compile(r"[^\W\d_][^\W\d_'’-]*")  # any script: "Garantie", "保証期間は"
_CURRENCIES = "$€£¥"


@dataclass
class RuleResult:
    """Outcome of :func:`check_claim`; ``ok`` is False when anything is missing or wrong.

    ``evidence_index`` is the position (in the evidence given) of the evidence that
    produced the mismatch, when there is one.
    """

    ok: bool
    missing: list[str] = field(default_factory=list)
    # the missing values a passage of the claim's own evidence states otherwise: a value of
    # the same kind and unit, another value ("15:00" where the passage says "10:00") that no
    # slot rule could pin as a mismatch; no verifier support outweighs these
    contested: list[str] = field(default_factory=list)
    mismatches: list[tuple[str, str]] = field(default_factory=list)  # (claim, evidence)
    correction: str | None = None
    explanation: str = ""
    evidence_index: int | None = None
    # (claim value, evidence value) of each mismatch that gave the correction
    swaps: list[tuple[Quantity, Quantity]] = field(default_factory=list)
    # evidence that only denies, quotes, asks or instructs the claim (guards.rules.framing): it
    # supports nothing (its P(supported) is capped in guards.verdict.decide)
    hollow: tuple[int, ...] = ()

    @property
    def denied_by_wording(self) -> bool:
        """The only mismatch is a passage's wording denying the claim (:mod:`guards.rules.framing`:
        "… is not waterproof", "Rumours that … are false"), not a value: a heuristic reading
        of the sentence, so a rewrite flags the claim rather than removing it."""
        return bool(self.mismatches) and all(e == "denied" for _, e in self.mismatches)


def _stem(word: str) -> str:
    w = word.lower().replace("’", "'").removesuffix("'s")
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def _near_words(text: str, q: Quantity) -> set[str]:
    """Content words within NEAR_WORDS words of the quantity, minus its own unit."""
    before = [m.group() for m in _WORD.finditer(text, 0, q.span[0])]
    after = [m.group() for m in _WORD.finditer(text, q.span[1])]
    words = {_stem(w) for w in (*before[-NEAR_WORDS:], *after[:NEAR_WORDS])}
    return {w for w in words if w not in ENGLISH_STOP_WORDS and len(w) > 1} - {q.unit}


def _content_words(text: str) -> set[str]:
    words = {_stem(m.group()) for m in _WORD.finditer(text)}
    return {w for w in words if w not in ENGLISH_STOP_WORDS and len(w) > 1}


_SENTENCE_END = re.compile(r"[.!?]\s|\n")


def _sentence_around(text: str, span: tuple[int, int]) -> str:
    """The sentence (or line) of ``text`` that holds ``span``."""
    start = 0
    for m in _SENTENCE_END.finditer(text, 0, span[0]):
        start = m.end()
    end_match = _SENTENCE_END.search(text, span[1])
    return text[start : end_match.start() + 1 if end_match else len(text)]


def _aligned(claim_words: set[str], sentence: str) -> bool:
    """The evidence sentence speaks of the same thing as the claim: it holds at least
    ALIGN_RECALL of the claim's content words. Keeps "a free replacement robot after two
    years" from being "corrected" by "return an unused robot within 30 days"."""
    if not claim_words:
        return True
    return len(claim_words & _content_words(sentence)) / len(claim_words) >= ALIGN_RECALL


def _same(q: Quantity, e: Quantity) -> bool:
    units_ok = not q.unit or not e.unit or q.unit_key() == e.unit_key()
    return units_ok and q.same_value(e)


def held(text: str, start: int, claim: str) -> Stance:
    """How ``text`` holds the value at ``start`` for ``claim``: its stance
    (:func:`guards.rules.polarity.stance`), where an asserted value stated only for another time,
    edition, variant or believer than the claim's (:func:`guards.rules.scope.scoped`) is only
    ``mentioned``."""
    found = stance(text, start)
    if found == "asserted" and scoped(text, start, claim):
        return "mentioned"
    return found


def _stated(
    claim: str,
    q: Quantity,
    negated: bool,
    evidence: Sequence[str],
    evidence_qs: Sequence[Sequence[Quantity]],
) -> tuple[bool, int | None]:
    """(some evidence asserts q's value with the claim's polarity, the first evidence that
    holds it with the other polarity — denies it, or asserts what the claim denies — or
    None). A value an evidence only mentions (quoted, asked, instructed;
    :func:`guards.rules.polarity.stance`) counts for neither."""
    denial: int | None = None
    for idx, (text, qs) in enumerate(zip(evidence, evidence_qs, strict=True)):
        for e in qs:
            if not _same(q, e):
                continue
            how = held(text, e.span[0], claim)
            if how == "mentioned":
                continue
            if (how == "denied") == negated:
                return True, None
            if denial is None:
                denial = idx
    return False, denial


def _match_slot(
    claim: str, q: Quantity, evidence: Sequence[str], evidence_qs: Sequence[Sequence[Quantity]]
) -> int:
    """How surely an evidence clause that asserts q's value speaks of q's item and attribute
    (the best :func:`guards.rules.slots.same_slot` over them; -1: none asserts it)."""
    claim_spans = [c.display_span for c in _quantities(claim)]
    best = -1
    for text, qs in zip(evidence, evidence_qs, strict=True):
        spans = [e.display_span for e in qs]
        for e in qs:
            if _same(q, e) and held(text, e.span[0], claim) == "asserted":
                slot = same_slot(claim, q.display_span, claim_spans, text, e.display_span, spans)
                best = max(best, slot)
                if best == 2:
                    return best
    return best


def _comparable(q: Quantity, e: Quantity) -> bool:
    key = q.unit_key()
    if not key or key != e.unit_key():
        return False
    if key == "<date>":  # compare like with like: a year with a year, a full date with one
        return isinstance(q.value, float) == isinstance(e.value, float) and (
            isinstance(q.value, float) or len(str(q.value)) == len(str(e.value))
        )
    return True


def _replacement(text: str, q: Quantity, e: Quantity) -> tuple[tuple[int, int], str]:
    """The span of ``text`` to replace and its new text: the evidence's value in the claim's
    style; value and unit together when the units differ ("2 years" → "12 months"); a
    bound's words go with the value ("more than 30,000" → "30,621", :mod:`guards.rules.approx`)."""
    span, value = q.span, _value_text(q, e)
    if q.unit != e.unit and q.kind == "number":
        span, value = q.display_span, e.display
    if q.surface in PERIOD_ADVERBS and e.surface not in PERIOD_ADVERBS:
        return q.span, f"every {e.display}"  # "annually" → "every 3 months"
    if e.surface in PERIOD_ADVERBS and q.period_start >= 0 and q.surface != e.surface:
        return (q.period_start, q.display_span[1]), e.surface  # "every 3 months" → "annually"
    bound = bound_of(text, q)
    return ((bound[1], span[1]) if bound else span), value


def _value_text(q: Quantity, e: Quantity) -> str:
    ev = e.surface
    if q.kind == "money":
        claim_symbol = q.surface[:1] in _CURRENCIES
        ev_symbol = ev[:1] in _CURRENCIES
        if ev_symbol and not claim_symbol:
            return ev[1:].lstrip()
        if claim_symbol and not ev_symbol:
            return q.surface[0] + ev
    return ev


@functools.lru_cache(maxsize=QUANTITY_CACHE)
def _quantities(text: str) -> tuple[Quantity, ...]:
    """The quantities of ``text`` but the numbers of its identifiers ("Item 150").

    Cached by text: one answer's claims share their evidence passages, so without it the
    same passage was parsed once per claim (~100 parses per 6-claim answer)."""
    ids = [span for _, span in identifiers(text)]
    found = extract_quantities(text)
    return tuple(q for q in found if not any(s <= q.span[0] < e for s, e in ids))


def _contesting(
    claim: str,
    q: Quantity,
    evidence: Sequence[str],
    evidence_qs: Sequence[Sequence[Quantity]],
    about: Sequence[bool],
) -> list[str]:
    """The other values of q's kind and unit that the claim's passages about its item state
    in words like the claim's around q ("meeting … room" around "10:00" for "15:00"): no slot
    rule pinned them as q's, yet they stand where q would (RuleResult.contested). A claim
    with no words around q (a stream's held fragment: "of 24 months") cannot tell slots
    apart: every such value contests it."""
    near = _near_words(claim, q)
    return [
        e.display
        for text, qs, on_item in zip(evidence, evidence_qs, about, strict=True)
        if on_item
        for e in qs
        if _comparable(q, e) and not q.same_value(e) and (not near or near & _near_words(text, e))
    ]


def _find_mismatch(
    claim: str,
    q: Quantity,
    evidence: Sequence[str],
    evidence_qs: Sequence[Sequence[Quantity]],
    about: Sequence[bool],
) -> tuple[int, Quantity, int] | None:
    """(evidence index, its value, how surely it fills the claim value's slot) of the value
    that should replace q, or None."""
    near = _near_words(claim, q)
    if not near:
        return None
    claim_words = _content_words(claim) - {q.unit}
    claim_spans = [c.display_span for c in _quantities(claim)]
    for idx, (text, qs) in enumerate(zip(evidence, evidence_qs, strict=True)):
        if not about[idx]:
            continue  # a passage about another item corrects nothing
        # the best: shares most words near the value; a part before a whole ("Seventeen
        # of the 30 counts were …": a claim counting what "were …" gets 17, not 30)
        best: tuple[tuple[int, bool, int], Quantity] | None = None
        spans = [e.display_span for e in qs]
        for e in qs:
            if not _comparable(q, e) or q.same_value(e):
                continue
            if not _aligned(claim_words, _sentence_around(text, e.span)):
                continue
            if held(text, e.span[0], claim) != "asserted":
                continue  # a denied, quoted or scoped value is nobody's value
            slot = same_slot(claim, q.display_span, claim_spans, text, e.display_span, spans)
            if not slot:
                continue  # another item or attribute ("repairs" / "returns")
            overlap = len(near & _near_words(text, e))
            key = (slot, not e.whole or q.whole, overlap)
            if overlap and (best is None or key > best[0]):
                best = (key, e)
        if best is not None:
            return idx, best[1], best[0][0]
    return None


def check_claim(
    claim: str,
    evidence: Sequence[str],
    rules: RulesPolicy | None = None,
    pool: Sequence[str] = (),
) -> RuleResult:
    """Check ``claim``'s numbers and names against ``evidence`` (best first).

    ``pool``: more texts (the evidence found for the answer's other claims) in which a
    number or name counts as stated; corrections and denials come from ``evidence`` only.
    """
    rules = rules or RulesPolicy()
    extra = [t for t in pool if t not in evidence]
    evidence_qs = [_quantities(t) for t in evidence]
    extra_qs = [_quantities(t) for t in extra]
    claim_ids = [name for name, _ in identifiers(claim)]
    claim_names = [n for n in named_entities(claim) if n.lower() not in UNITS]  # "Monate"
    # passages about the claim's item: naming its identifiers and its named entities
    about = [
        names_all(claim_ids, t) and all(mentions(n, [t]) for n in claim_names) for t in evidence
    ]
    missing: list[str] = []
    contested: list[str] = []
    mismatches: list[tuple[str, str]] = []
    swaps: list[tuple[tuple[int, int], str]] = []
    pairs: list[tuple[Quantity, Quantity]] = []
    mismatch_at: int | None = None
    notes: list[str] = []
    for q in _quantities(claim):
        negated = denied(claim, q.span[0])
        stated, denial = _stated(claim, q, negated, evidence, evidence_qs)
        found = None
        if stated and not negated and _match_slot(claim, q, evidence, evidence_qs) < 2:
            # the value stands only in clauses not surely about its item and attribute ("24
            # months" of the mower for the robot's warranty): a value surely of its slot wins
            found = _find_mismatch(claim, q, evidence, evidence_qs, about)
            if found is None or found[2] < 2:
                continue
        elif stated or _stated(claim, q, negated, extra, extra_qs)[0]:
            continue
        else:
            found = _find_mismatch(claim, q, evidence, evidence_qs, about)
        if negated and found is not None:
            continue  # "not 24 months" where the same slot holds 12 months: consistent
        if found is not None and (mismatch_at is None or found[0] == mismatch_at):
            mismatch_at, e, _ = found
            mismatches.append((q.display, e.display))
            swaps.append(_replacement(claim, q, e))
            pairs.append((q, e))
            notes.append(f"evidence states {e.display}, claim states {q.display}")
        elif denial is not None and about[denial] and mismatch_at in (None, denial):
            mismatch_at = denial
            if negated:
                mismatches.append((f"not {q.display}", q.display))
                notes.append(f"evidence states {q.display}, claim denies it")
            else:
                mismatches.append((q.display, f"not {q.display}"))
                notes.append(f"evidence denies {q.display}, claim asserts it")
        elif rules.numbers_need_evidence:
            missing.append(q.display)
            others = _contesting(claim, q, evidence, evidence_qs, about)
            if others:
                contested.append(q.display)
                notes.append(f"claim states {q.display}; the evidence states {others[0]}")
            else:
                notes.append(f"claim states {q.display}; no evidence states it")
    if rules.entities_need_evidence:
        for name in claim_ids:
            if not any(names_all([name], t) for t in (*evidence, *extra)):
                missing.append(name)
                notes.append(f"claim names {name}; no evidence mentions it")
        for name in claim_names:
            if not mentions(name, [*evidence, *extra]):
                missing.append(name)
                notes.append(f"claim names {name}; no evidence mentions it")
    frames = [frame(claim, t) for t in evidence]
    denial = next((i for i, f in enumerate(frames) if f == "denied" and about[i]), None)
    if not mismatches and "asserted" not in frames and denial is not None:
        mismatch_at = denial
        mismatches.append((claim, "denied"))
        notes.append(f"evidence denies it ({_sentence_quote(evidence[denial], claim)})")
    correction = _substitute(claim, swaps) if swaps else None
    return RuleResult(
        ok=not missing and not mismatches,
        missing=missing,
        contested=contested,
        mismatches=mismatches,
        correction=correction,
        explanation="; ".join(notes),
        evidence_index=mismatch_at,
        swaps=pairs,
        hollow=tuple(i for i, f in enumerate(frames) if f in ("denied", "mentioned")),
    )


def _sentence_quote(text: str, claim: str, limit: int = 120) -> str:
    """The sentence of ``text`` holding most of the claim's words, quoted, cut at ``limit``."""
    words = _content_words(claim)
    spans = [m.span() for m in re.finditer(r"[^.!?\n]+[.!?]*", text)] or [(0, len(text))]
    best = max(spans, key=lambda sp: len(words & _content_words(text[sp[0] : sp[1]])))
    quote = text[best[0] : best[1]].strip()
    return repr(quote if len(quote) <= limit else quote[: limit - 1] + "…")


def _substitute(text: str, swaps: Sequence[tuple[tuple[int, int], str]]) -> str:
    for (start, end), new in sorted(swaps, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def same_correction(text: str, swaps: Sequence[tuple[Quantity, Quantity]]) -> str | None:
    """``text`` with each value a correction replaced (``swaps``: claim value → evidence
    value) replaced the same way, or None when ``text`` states none of them."""
    edits = [
        _replacement(text, q, e)
        for q in _quantities(text)
        for wrong, e in swaps
        if q.unit_key() == wrong.unit_key() and q.same_value(wrong)
    ]
    return _substitute(text, edits) if edits else None
