"""Moved: the exception tree lives in :mod:`groundproxy.errors`, a module that imports
nothing, so ``policies``, ``retrieval`` and ``models`` use it without importing ``guards``.

This alias keeps old imports working; new code imports ``groundproxy.errors``.
"""

from __future__ import annotations

from groundproxy.errors import *  # noqa: F403
from groundproxy.errors import __all__ as __all__
