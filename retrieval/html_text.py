"""HTML → plain text with the standard library: drop scripts/styles, keep paragraphs."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
_BLOCK = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "ul",
    }
)
_SPACES_RE = re.compile(r"[ \t\r\f\v\u00a0]+")


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._current: list[str] = []
        self._skip_depth = 0

    def _break(self) -> None:
        text = _SPACES_RE.sub(" ", " ".join("".join(self._current).split("\n"))).strip()
        if text:
            self.paragraphs.append(text)
        self._current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip_depth += 1
        if tag in _BLOCK:
            self._break()
        elif tag == "br":
            self._current.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
        if tag in _BLOCK:
            self._break()

    def handle_data(self, data: str) -> None:
        if self._skip_depth == 0:
            self._current.append(data)

    def close(self) -> None:
        super().close()
        self._break()


def html_to_text(html: str) -> str:
    """Visible text of ``html``; block elements become paragraphs separated by a blank line."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return "\n\n".join(parser.paragraphs)
