"""ROC and reliability (calibration) plots for the accuracy bench, saved as PNG.

``scores`` maps dataset → verifier → (labels, P(supported)); label 1 = hallucinated.
One figure per kind, one panel per dataset, one line per verifier:

* ROC: true-positive rate of "hallucinated" against false-positive rate, scoring each row
  with 1 − P(supported); the legend carries the ROC-AUC.
* Reliability: rows binned by P(supported) (10 equal-width bins); for each bin with rows,
  the observed share of NOT-hallucinated rows against the mean predicted P(supported). A
  calibrated verifier sits on the diagonal; the legend carries the expected calibration
  error (ECE: the row-weighted mean gap).

matplotlib is an optional dependency (``pip install .[bench]``; pinned in the lock): the
bench and ``groundproxy eval --out`` use it; :func:`save_plots` raises
:class:`~groundproxy.errors.BadRequestError` saying so when it is missing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.errors import BadRequestError

Scores = dict[str, dict[str, tuple[list[int], npt.NDArray[np.float64]]]]
BINS = 10
PAD = 0.03  # axes margin around [0, 1]


def reliability(
    labels: list[int], p_sup: npt.NDArray[np.float64]
) -> tuple[list[float], list[float], float]:
    """(mean predicted, observed supported share) per non-empty bin, and the ECE."""
    y_ok = 1.0 - np.asarray(labels, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, BINS + 1)
    which = np.clip(np.digitize(p_sup, edges[1:-1]), 0, BINS - 1)
    xs: list[float] = []
    ys: list[float] = []
    ece = 0.0
    for b in range(BINS):
        m = which == b
        if not m.any():
            continue
        xs.append(float(p_sup[m].mean()))
        ys.append(float(y_ok[m].mean()))
        ece += float(m.mean()) * abs(xs[-1] - ys[-1])
    return xs, ys, ece


def _grid(n: int) -> tuple[int, int]:
    cols = min(4, n)
    return math.ceil(n / cols), cols


def save_plots(scores: Scores, out_dir: Path, mode: str = "context") -> list[Path]:
    """Write ``roc.png`` and ``reliability.png`` under ``out_dir``; return their paths."""
    try:
        import matplotlib
    except ImportError as exc:
        raise BadRequestError(
            "plots need matplotlib: install the bench extra (pip install 'groundproxy[bench]')"
        ) from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_auc_score, roc_curve

    out_dir.mkdir(parents=True, exist_ok=True)
    datasets = sorted(scores)
    rows, cols = _grid(len(datasets))
    written: list[Path] = []
    for kind in ("roc", "reliability"):
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 4.0 * rows), squeeze=False)
        for k, dataset in enumerate(datasets):
            ax = axes[k // cols][k % cols]
            for verifier, (labels, p_sup) in sorted(scores[dataset].items()):
                if len(set(labels)) < 2:
                    continue
                if kind == "roc":
                    fpr, tpr, _ = roc_curve(labels, 1.0 - p_sup)
                    auc = roc_auc_score(labels, 1.0 - p_sup)
                    ax.plot(fpr, tpr, label=f"{verifier} ({auc:.3f})")
                else:
                    xs, ys, ece = reliability(labels, p_sup)
                    ax.plot(xs, ys, marker="o", label=f"{verifier} (ECE {ece:.3f})")
            ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
            ax.set_title(dataset, fontsize=10)
            # a little room around [0, 1]: a perfect ROC curve runs along x = 0 and y = 1,
            # where the axes' spines would hide it (and a reliability point at 0 or 1 too)
            ax.set_xlim(-PAD, 1 + PAD)
            ax.set_ylim(-PAD, 1 + PAD)
            if kind == "roc":
                ax.set_xlabel("false-positive rate")
                ax.set_ylabel("true-positive rate (hallucinated)")
            else:
                ax.set_xlabel("mean predicted P(supported)")
                ax.set_ylabel("observed share supported")
            ax.legend(fontsize=7, loc="lower right")
        for k in range(len(datasets), rows * cols):
            axes[k // cols][k % cols].axis("off")
        fig.suptitle(
            f"ROC, hallucination detection ({mode} mode)"
            if kind == "roc"
            else f"Reliability of P(supported) ({mode} mode)"
        )
        fig.tight_layout()
        path = out_dir / f"{kind}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written
