"""Load tenant policies from a directory and keep them current without dropping requests.

:class:`PolicyStore` serves lookups (API key → tenant policy) from an immutable
snapshot; :meth:`PolicyStore.reload` builds a new snapshot and swaps it in with
one reference assignment, so a concurrent request sees either the old or the new
policies, never a mix. Reloads are serialized by a lock.

Rules on reload (``reload()``, the watcher thread, SIGHUP):

* a file whose content is unchanged (mtime + size, then sha256 of the bytes) is not
  re-validated;
* a bad edit keeps the last good policy of that file and logs why (a warning);
* a deleted file removes its tenant;
* a file claiming a tenant or an API key that another file already holds is
  rejected (its last good policy, if any, stays); the file that held it first wins;
* new files (at start-up: every file) that claim the same tenant or key are all refused,
  whatever their names: no file wins by sorting first (``snapshot.mutual_clashes``).

``key_env`` variables are read when a file is (re)loaded: changing the variable
alone does not change a loaded policy.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from groundproxy.errors import PolicyError
from groundproxy.policies.keys import hash_key
from groundproxy.policies.parsing import POLICY_SUFFIXES, LoadedPolicy, load_policy_file
from groundproxy.policies.snapshot import (
    RACY_NS,
    Candidate,
    FileState,
    Snapshot,
    build_snapshot,
    log_changes,
    mutual_clashes,
    resolve,
    scan_file,
)

__all__ = ["LoadedPolicy", "PolicyStore", "load_policy_file"]

log = structlog.get_logger(__name__)

_Fingerprint = tuple[tuple[str, int, int], ...]
_SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class PolicyStore:
    """All tenant policies of one directory (``*.yaml`` / ``*.yml``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._snapshot = Snapshot({}, {}, {})
        self._files: dict[Path, FileState] = {}
        self._fingerprint: _Fingerprint | None = None
        self._scanned_ns = 0
        self._dir_missing = False
        self._lock = threading.Lock()
        self._watch_thread: threading.Thread | None = None
        self._watch_stop = threading.Event()
        self._prev_sighup: _SignalHandler = None
        self._sighup_installed = False

    # --- lookups (lock-free: one read of the snapshot reference) -------------------------

    def lookup_key(self, raw_key: str) -> LoadedPolicy | None:
        """The policy of the tenant whose API key is ``raw_key``, or None."""
        return self._lookup(raw_key, admin=False)

    def lookup_admin_key(self, raw_key: str) -> LoadedPolicy | None:
        """The policy of the tenant whose admin key is ``raw_key``, or None."""
        return self._lookup(raw_key, admin=True)

    def _lookup(self, raw_key: str, *, admin: bool) -> LoadedPolicy | None:
        if not raw_key:
            return None
        snap = self._snapshot
        tenant = (snap.by_admin_key if admin else snap.by_key).get(hash_key(raw_key))
        return None if tenant is None else snap.by_tenant.get(tenant)

    def get(self, tenant: str) -> LoadedPolicy | None:
        return self._snapshot.by_tenant.get(tenant)

    def tenants(self) -> list[str]:
        return sorted(self._snapshot.by_tenant)

    def errors(self) -> list[str]:
        """Why each rejected file's current content is not served (as of the last scan)."""
        files = [s.error for _, s in sorted(self._files.items()) if s.error]
        return files + [e for _, e in sorted(self._snapshot.refused.items())]

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> list[str]:
        """Load every policy file from scratch; return the error messages of bad files.

        Raises PolicyError when the directory is missing or no policy loads.
        """
        with self._lock:
            files, snap, fingerprint, now = self._scan({})
            errors = self._fatal(files, snap)
            self._commit(files, snap, fingerprint, now)
            log.info(
                "policies_loaded",
                directory=str(self.directory),
                tenants=len(snap.by_tenant),
                errors=len(errors),
            )
            return errors

    def check(self) -> list[str]:
        """What :meth:`load` would report (raises the same PolicyError), loading nothing:
        ``serve`` checks the folder before it starts."""
        files, snap, _, _ = self._scan({})
        return self._fatal(files, snap)

    def _fatal(self, files: dict[Path, FileState], snap: Snapshot) -> list[str]:
        """The errors of a scan from scratch; PolicyError when no policy loads."""
        errors = [s.error for _, s in sorted(files.items()) if s.error]
        errors += [e for _, e in sorted(snap.refused.items())]
        if not snap.by_tenant:
            detail = (
                "; ".join(errors)
                if errors
                else (
                    "no policy file (*.yaml, *.yml) in it: copy policies/demo.yaml there as "
                    "<tenant>.yaml and edit it"
                )
            )
            raise PolicyError(f"{self.directory}: no policy loaded: {detail}")
        return errors

    def reload(self) -> list[str]:
        """Pick up changed, added and removed files; return current error messages.

        Never raises for bad files (their last good policy stays); a missing
        directory keeps every policy and is reported as an error.
        """
        with self._lock:
            try:
                files, snap, fingerprint, now = self._scan(self._files)
            except PolicyError as exc:
                if not self._dir_missing:
                    log.warning("policy_reload_failed", error=exc.message)
                self._dir_missing = True
                return [exc.message]
            self._dir_missing = False
            self._commit(files, snap, fingerprint, now)
            return self.errors()

    def _commit(
        self, files: dict[Path, FileState], snap: Snapshot, fp: _Fingerprint, now: int
    ) -> None:
        old = self._files
        self._snapshot = snap  # the atomic swap requests observe
        self._files = files
        self._fingerprint = fp
        self._scanned_ns = now
        log_changes(old, files)
        for path, why in sorted(snap.refused.items()):
            log.warning("policy_refused", path=str(path), error=why)

    def _list_files(self) -> list[Path]:
        if not self.directory.is_dir():
            raise PolicyError(f"{self.directory}: policy directory does not exist")
        return sorted(
            p
            for p in self.directory.iterdir()
            if p.suffix in POLICY_SUFFIXES and not p.name.startswith(".") and p.is_file()
        )

    def _scan(
        self, old_files: dict[Path, FileState]
    ) -> tuple[dict[Path, FileState], Snapshot, _Fingerprint, int]:
        now = time.time_ns()
        states: dict[Path, FileState] = {}
        fingerprint: list[tuple[str, int, int]] = []
        for path in self._list_files():
            try:
                state = scan_file(path, old_files.get(path), now)
            except FileNotFoundError:  # deleted between listing and reading
                continue
            states[path] = state
            fingerprint.append((path.name, state.mtime_ns, state.size))

        incumbents = [
            s.serving for s in states.values() if s.candidate is None and s.serving is not None
        ]
        candidates = [
            Candidate(p, s.candidate, s.serving)
            for p, s in sorted(states.items())
            if s.candidate is not None
        ]
        refused = mutual_clashes(candidates)  # new files that clash: none of them served
        accepted, rejected = resolve(incumbents, [c for c in candidates if c.path not in refused])
        rejected.update(refused)
        for cand in candidates:
            if cand.path in accepted:
                states[cand.path] = replace(
                    states[cand.path], serving=cand.new, candidate=None, error=None
                )
            else:
                states[cand.path] = replace(states[cand.path], error=rejected[cand.path])
        return states, build_snapshot(states), tuple(fingerprint), now

    # --- watching --------------------------------------------------------------------------

    def start_watching(self, interval_s: float = 1.0) -> None:
        """Poll the directory every ``interval_s`` in a daemon thread; reload on change."""
        if self._watch_thread is not None and self._watch_thread.is_alive():
            return
        self._watch_stop = threading.Event()
        self._watch_thread = threading.Thread(
            target=self._watch,
            args=(interval_s, self._watch_stop),
            name="groundproxy-policy-watcher",
            daemon=True,
        )
        self._watch_thread.start()

    def stop_watching(self) -> None:
        self._watch_stop.set()
        thread, self._watch_thread = self._watch_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10.0)

    def _watch(self, interval_s: float, stop: threading.Event) -> None:
        while not stop.wait(interval_s):
            try:
                if self._needs_reload():
                    self.reload()
            except Exception:
                log.exception("policy_watch_failed", directory=str(self.directory))

    def _needs_reload(self) -> bool:
        try:
            paths = self._list_files()
        except PolicyError:
            return not self._dir_missing
        current: list[tuple[str, int, int]] = []
        for path in paths:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            current.append((path.name, st.st_mtime_ns, st.st_size))
        if tuple(current) != self._fingerprint:
            return True
        return any(mtime + RACY_NS >= self._scanned_ns for _, mtime, _ in current)

    # --- SIGHUP ----------------------------------------------------------------------------

    def install_sighup(self, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Reload on SIGHUP; return whether a handler was (or will be) installed.

        In the main thread this uses ``signal.signal`` (the previous handler is kept
        for :meth:`uninstall_sighup`). Elsewhere it needs ``loop`` — a running event
        loop whose thread may set signal handlers — and schedules
        ``loop.add_signal_handler`` on it. The reload runs in a short-lived thread,
        never inside the signal handler.
        """
        sig = getattr(signal, "SIGHUP", None)
        if sig is None:
            log.warning("policy_sighup_unsupported")
            return False
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(sig, self._on_sighup)
            if not self._sighup_installed:
                self._prev_sighup = previous
            self._sighup_installed = True
            return True
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self._add_loop_handler, loop, sig)
            return True
        log.warning("policy_sighup_not_installed", reason="not the main thread and no running loop")
        return False

    def install_sighup_handler(self) -> bool:
        """Same as :meth:`install_sighup` without an event loop."""
        return self.install_sighup(None)

    def uninstall_sighup(self) -> None:
        """Restore the SIGHUP handler found by :meth:`install_sighup` (main thread only)."""
        sig = getattr(signal, "SIGHUP", None)
        if sig is None or not self._sighup_installed:
            return
        previous = self._prev_sighup
        signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._sighup_installed = False
        self._prev_sighup = None

    def _add_loop_handler(self, loop: asyncio.AbstractEventLoop, sig: int) -> None:
        try:
            loop.add_signal_handler(sig, self.reload_in_background, "SIGHUP")
        except (NotImplementedError, RuntimeError, ValueError) as exc:
            log.warning("policy_sighup_not_installed", reason=str(exc))

    def _on_sighup(self, signum: int, frame: FrameType | None) -> None:
        self.reload_in_background("SIGHUP")

    def reload_in_background(self, trigger: str = "request") -> None:
        """Start :meth:`reload` in a daemon thread (safe from signal handlers and loops)."""
        threading.Thread(
            target=self._safe_reload, args=(trigger,), name="groundproxy-policy-reload", daemon=True
        ).start()

    def _safe_reload(self, trigger: str) -> None:
        log.info("policy_reload_requested", trigger=trigger, directory=str(self.directory))
        try:
            self.reload()
        except Exception:
            log.exception("policy_reload_failed", directory=str(self.directory))
