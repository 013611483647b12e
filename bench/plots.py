"""The bench's ROC and reliability plots: they live in ``groundproxy.proxy.cli.plots``, which
``groundproxy eval --out`` uses too."""

from groundproxy.proxy.cli.plots import BINS, Scores, reliability, save_plots

__all__ = ["BINS", "Scores", "reliability", "save_plots"]
