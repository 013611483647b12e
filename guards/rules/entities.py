"""Capitalized named-entity phrases, and whether a text mentions them.

A phrase is a run of capitalized words, joined by "of", "the", "de", "van", "von", "&",
"for" when another capitalized word follows ("Bank of America"). Acronyms (two or
more capitals, "FDA") always count. At the start of a sentence (or after ":"), leading
common words are dropped ("The Eiffel Tower" → "Eiffel Tower") and a lone capitalized
word is not taken as a name ("Warranty claims …"), since capitalization says nothing
there. Month and weekday names are dates, not entities. Matching is case-insensitive
and ignores a possessive "'s".
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from groundproxy.guards.rules.lexicon import COMMON_CAPITALIZED, MONTHS, WEEKDAYS

# A label and its number: "Item 150", "Room 12", "Flight 370", "No. 5", "#3".
_IDENTIFIER = re.compile(
    r"(?<![\w#])(?:([A-Z][a-z]+|[A-Z]{2,})\.?\s?|#)(\d+[A-Za-z]?)\b(?![.,–-]\d)"
)

_TOKEN = re.compile(r"[A-Za-z][\w'’.&-]*[\w]|[A-Za-z]|&|[.!?:;]|[,()\"“”\[\]|*/]")
_CONNECTORS = frozenset({"of", "the", "de", "da", "del", "la", "le", "van", "von", "&", "for"})
_BREAKS = frozenset(',()"“”[]|*/')
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9&]+s?$")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)
_POSSESSIVE_END = re.compile(r"['’]s?$")
_NON_WORD = re.compile(r"\W+")
_DOTTED = re.compile(r"\b(?:\w\.){2,}")
_DATE_WORDS = frozenset(MONTHS) | WEEKDAYS
_SKIP_LEADING = COMMON_CAPITALIZED | _CONNECTORS
_NOT_LABELS = ENGLISH_STOP_WORDS | {"just", "around", "roughly", "some", "top", "under", "over"}


def _is_capitalized(tok: str) -> bool:
    return tok[:1].isupper() and tok.lower().rstrip(".") not in _DATE_WORDS


def _clean(tok: str) -> str:
    return tok.rstrip(".'’")


def named_entities(text: str) -> list[str]:
    """Named-entity phrases of ``text`` in order, without duplicates."""
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    phrases: list[str] = []
    i = 0
    sentence_start = True
    while i < len(tokens):
        tok, _ = tokens[i]
        if tok in ".!?:;":
            sentence_start = True
            i += 1
            continue
        if tok in _BREAKS:
            i += 1
            continue
        if not _is_capitalized(tok):
            sentence_start = False
            i += 1
            continue
        j = i + 1
        words = [_clean(tok)]
        while j < len(tokens):
            nxt = tokens[j][0]
            if _is_capitalized(nxt):
                words.append(_clean(nxt))
                j += 1
            elif (
                nxt.lower() in _CONNECTORS
                and j + 1 < len(tokens)
                and _is_capitalized(tokens[j + 1][0])
                and len(words) >= 1
            ):
                words.extend([nxt, _clean(tokens[j + 1][0])])
                j += 2
            else:
                break
        if sentence_start:
            while words and words[0].lower() in _SKIP_LEADING:
                words.pop(0)
            if len(words) == 1 and not _ACRONYM.match(words[0]):
                words = []
        else:
            while words and words[0].lower() in _CONNECTORS:
                words.pop(0)
            if len(words) == 1 and words[0].lower() in COMMON_CAPITALIZED:
                words = []
        while words and words[-1].lower() in _CONNECTORS:
            words.pop()
        phrase = _POSSESSIVE_END.sub("", " ".join(words))
        if phrase and phrase not in phrases:
            phrases.append(phrase)
        sentence_start = False
        i = j
    return phrases


def identifiers(text: str) -> list[tuple[str, tuple[int, int]]]:
    """Label-and-number identifiers ("Item 150") of ``text`` with the span of the number:
    the number names a thing, it is not a quantity, and a passage is about that thing only
    when it names it whole ("Item 50" is not "Item 150")."""
    out: list[tuple[str, tuple[int, int]]] = []
    for m in _IDENTIFIER.finditer(text):
        label, number = m.group(1), m.group(2)
        if label is not None and _not_a_label(label):
            continue
        if number.isdigit() and len(number) == 4 and 1000 <= int(number) <= 2100:
            continue  # "Paris 2024": a year
        out.append((m.group(0), m.span(2)))
    return out


def _not_a_label(word: str) -> bool:
    low = word.lower()
    return low in _SKIP_LEADING or low in _DATE_WORDS or low in _NOT_LABELS or low.endswith("ly")


def names_all(needles: Sequence[str], text: str) -> bool:
    """Does ``text`` name every identifier in ``needles`` as a whole phrase?"""
    hay = f" {normalize(text)} "
    return all(f" {normalize(n)} " in hay for n in needles)


@functools.lru_cache(maxsize=8192)  # the same passages are normalized for every claim
def normalize(text: str) -> str:
    """Lower-case, diacritics dropped ("Böðvarsson" → "bodvarsson"), possessive "'s"
    dropped, dotted acronyms joined ("U.S." → "us"), punctuation as spaces, single-spaced."""
    text = _fold(text.lower())
    text = _DOTTED.sub(lambda m: m.group().replace(".", ""), _POSSESSIVE.sub("", text))
    return " ".join(_NON_WORD.sub(" ", text).replace("_", " ").split())


# Letters NFKD does not split into a base letter and a mark.
_LETTERS = str.maketrans({"ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "æ": "ae", "Æ": "Ae",
                          "ø": "o", "Ø": "O", "ß": "ss", "đ": "d", "Đ": "D", "ł": "l",
                          "Ł": "L", "œ": "oe", "Œ": "Oe", "ı": "i"})  # fmt: skip


@functools.lru_cache(maxsize=8192)
def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.translate(_LETTERS))
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _variants(words: list[str]) -> list[str]:
    """Shorter forms a text may use for a name of several words: its last half or more
    ("National Film Registry" for "United States National Film Registry"; "Obama" for
    "Barack Obama"; the last word alone, see :func:`_alone`)."""
    n = len(words)
    return [" ".join(words[k:]) for k in range(1, n - (n + 1) // 2 + 1)]


def _alone(word: str, text: str) -> bool:
    """``word`` (a surname) in ``text`` on its own, not inside another name: no
    capitalized word right after it ("Obama said" names Obama; "Marie Curie" is not
    "Lisa Marie")."""
    if len(word) < 4 or word in _SKIP_LEADING:
        return False
    folded = _fold(text)
    for m in re.finditer(rf"\b{re.escape(word)}\b", folded, re.IGNORECASE):
        after = _TOKEN.match(folded, m.end() + 1) if folded[m.end() : m.end() + 1] == " " else None
        if after is None or not _is_capitalized(after.group()):
            return True
    return False


def mentions(entity: str, texts: Sequence[str]) -> bool:
    """Does any of ``texts`` mention ``entity``: as a phrase, all its words, or a shorter
    form (:func:`_variants`), after :func:`normalize` on both sides?"""
    needle = normalize(entity)
    if not needle:
        return True
    words = [w for w in needle.split() if w not in _CONNECTORS]
    short = _variants(needle.split())
    for text in texts:
        hay = f" {normalize(text)} "
        if f" {needle} " in hay or any(f" {v} " in hay for v in short if " " in v):
            return True
        if any(_alone(v, text) for v in short if " " not in v):
            return True
        vocab = set(hay.split())
        if words and all(w in vocab for w in words):
            return True
    return False
