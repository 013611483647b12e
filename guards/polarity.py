"""Is a value asserted or denied where it stands? ("It was never 10 years.")

A value is *denied* when a negation word ("not", "never", "no", a "-n't" verb …;
:data:`guards.lexicon.NEGATIONS`) stands among the :data:`WINDOW` words before it in its
own sentence, unless the negation only bounds it ("no more than 10", "not before 9 am",
"not only 5"; :data:`guards.lexicon.NEGATION_BOUNDS`). The rules count a value as stated
by the evidence only with the same polarity as in the claim: a passage that mentions
"10 years" only to deny it does not support "covered for 10 years" — it contradicts it.
"""

from __future__ import annotations

import re

from groundproxy.guards.lexicon import NEGATION_BOUNDS, NEGATIONS

WINDOW = 5
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_SENTENCE_END = re.compile(r"[.!?;]\s|\n")


def _is_negation(word: str) -> bool:
    w = word.lower().replace("’", "'")
    return w in NEGATIONS or w.endswith("n't")


def denied(text: str, start: int) -> bool:
    """Is the value starting at ``start`` of ``text`` under a negation (see the module)?"""
    begin = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        begin = m.end()
    words = _WORD.findall(text, begin, start)[-WINDOW:]
    for i, w in enumerate(words):
        if _is_negation(w):
            after = words[i + 1].lower() if i + 1 < len(words) else ""
            if after not in NEGATION_BOUNDS:
                return True
    return False
