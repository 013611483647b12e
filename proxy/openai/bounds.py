"""Bounds on what a client sends, and the characters refused where a text is stored.

Every request body is at most ``GROUNDPROXY_MAX_BODY_BYTES`` (413) and nests at most
``GROUNDPROXY_MAX_JSON_DEPTH`` levels (400): that bounds every string and list. The texts
and lists the proxy itself keeps or works through have bounds of their own (400 naming the
field), listed in the README ("Input"):

======================================  =========================================
what                                    bound
======================================  =========================================
an answer, a question                   ``MAX_TEXT`` characters
evidence strings (``context``)          ``MAX_CONTEXT_ITEMS`` items, ``MAX_TEXT`` each
labelled claims                         ``MAX_CLAIMS`` items, ``MAX_CLAIM_CHARS`` each
a model name                            ``MAX_MODEL_CHARS`` characters
======================================  =========================================

A text that is stored (a reviewer's label, a document, the model name a trace keeps) may
not hold control characters other than the whitespace ones (tab, line and form feeds,
carriage return) — NUL above all — nor the Unicode bidirectional embedding, override and
isolate controls (U+202A–U+202E, U+2066–U+2069), which make stored text read differently
from what it is ("Trojan Source"): :data:`StoredText` refuses them (400 naming the field).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

MAX_TEXT = 100_000
MAX_CONTEXT_ITEMS = 64
MAX_CLAIMS = 200
MAX_CLAIM_CHARS = 10_000
MAX_MODEL_CHARS = 256

_UNSTORABLE = re.compile("[\x00-\x08\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def storable(text: str) -> str:
    """``text``, unless it holds a character refused in stored text (module docstring)."""
    bad = _UNSTORABLE.search(text)
    if bad is not None:
        raise ValueError(
            f"holds the control character U+{ord(bad.group()):04X} at {bad.start()}: "
            "NUL, other C0 controls and bidirectional overrides are refused"
        )
    return text


#: a text that is stored: at most ``MAX_TEXT`` characters, no control characters
StoredText = Annotated[str, StringConstraints(max_length=MAX_TEXT), AfterValidator(storable)]
#: the same, not empty
StoredNonEmpty = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_TEXT), AfterValidator(storable)
]
#: a document's text (bounded by the body size alone)
DocumentText = Annotated[str, StringConstraints(min_length=1), AfterValidator(storable)]
#: a text the proxy works through but does not keep
BoundedText = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
#: evidence strings of a check (read, not kept: only their digest is)
EvidenceItems = Annotated[list[BoundedText], Field(max_length=MAX_CONTEXT_ITEMS)]
#: evidence strings of a label (kept)
ContextItems = Annotated[list[StoredText], Field(max_length=MAX_CONTEXT_ITEMS)]
#: a client's model name (stored with its trace)
ModelName = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_MODEL_CHARS), AfterValidator(storable)
]
