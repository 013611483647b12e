"""A plain-text table for the benchmarks' printed figures (first column left-aligned)."""

from __future__ import annotations


def table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head))]

    def line(r: list[str]) -> str:
        cells = zip(r, widths, strict=True)
        return "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(cells))

    return "\n".join([line(head), *(line(r) for r in rows)])
