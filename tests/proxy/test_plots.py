"""``groundproxy eval --out`` and the accuracy bench draw their ROC curves with
:func:`proxy.cli.plots.save_plots`: a perfect verifier's curve runs along x = 0 and y = 1 and
must show, not lie under the axes' spines (issue 31, item 8: before, only its legend entry
was drawn in its colour — 36 pixels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from groundproxy.proxy.cli.plots import save_plots


def _curve_pixels(png: Path) -> int:
    """Pixels in the first line colour (matplotlib's C0 blue: blue well above red)."""
    import matplotlib.image as mpimg

    rgb = mpimg.imread(png)[:, :, :3]
    return int((rgb[:, :, 2] - rgb[:, :, 0] > 0.3).sum())


def test_a_perfect_roc_curve_is_drawn_inside_the_axes(tmp_path: Path) -> None:
    labels = [0] * 20 + [1] * 20
    perfect = np.array([0.9] * 20 + [0.1] * 20)  # P(supported): every hallucination lowest
    roc, reliability = save_plots({"perfect": {"embedhead": (labels, perfect)}}, tmp_path)
    assert (roc.name, reliability.name) == ("roc.png", "reliability.png")
    import matplotlib.image as mpimg

    height, width = mpimg.imread(roc).shape[:2]
    # the two sides of the curve span most of the panel: far more than a legend entry
    assert _curve_pixels(roc) > (height + width) // 2, _curve_pixels(roc)
