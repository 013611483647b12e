"""Per-file state and snapshot assembly for :class:`policies.loader.PolicyStore`.

Internal to ``policies``: decides which file contents are served when files
clash (same tenant, same API key) and logs what changed. Never logs key material.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from groundproxy.errors import PolicyError
from groundproxy.policies.parsing import LoadedPolicy, line_of, parse_policy_bytes
from groundproxy.policies.sharing import sharing_errors

log = structlog.get_logger(__name__)

# A file modified this close (ns) to the scan that read it is re-read next time even
# if mtime and size look unchanged: two writes in one timestamp tick ("racy git").
RACY_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class FileState:
    mtime_ns: int
    size: int
    digest: str
    scanned_ns: int
    serving: LoadedPolicy | None  # what this file contributes now (its last good policy)
    candidate: LoadedPolicy | None  # valid content held back by a conflict
    error: str | None  # why the current content is not served

    def is_clean(self, st: os.stat_result) -> bool:
        return (
            st.st_mtime_ns == self.mtime_ns
            and st.st_size == self.size
            and self.mtime_ns + RACY_NS < self.scanned_ns
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    by_tenant: dict[str, LoadedPolicy]
    by_key: dict[str, str]  # key hash → tenant
    by_admin_key: dict[str, str]  # admin key hash → tenant
    # valid files not served (policies.sharing), and why
    refused: dict[Path, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Candidate:
    path: Path
    new: LoadedPolicy
    last_good: LoadedPolicy | None


def scan_file(path: Path, old: FileState | None, now: int) -> FileState:
    """The state of one file; re-validates only when its bytes changed."""
    st = path.stat()
    if old is not None and old.is_clean(st):
        return old
    last_good = old.serving if old is not None else None
    try:
        with path.open("rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except FileNotFoundError:
        raise
    except OSError as exc:
        error = f"{path}: cannot read policy file: {exc.strerror or exc}"
        return FileState(st.st_mtime_ns, st.st_size, "", now, last_good, None, error)
    digest = hashlib.sha256(data).hexdigest()
    if old is not None and digest == old.digest:
        return replace(old, mtime_ns=st.st_mtime_ns, size=st.st_size, scanned_ns=now)
    try:
        loaded = parse_policy_bytes(path, data)
    except PolicyError as exc:
        return FileState(st.st_mtime_ns, st.st_size, digest, now, last_good, None, exc.message)
    return FileState(st.st_mtime_ns, st.st_size, digest, now, last_good, loaded, None)


class _Claims:
    """Tenants and key hashes already taken while a snapshot is assembled."""

    def __init__(self) -> None:
        self.tenants: dict[str, LoadedPolicy] = {}
        self.keys: dict[str, LoadedPolicy] = {}

    def add(self, lp: LoadedPolicy) -> None:
        self.tenants[lp.tenant] = lp
        for h in lp.key_hashes | lp.admin_key_hashes:
            self.keys[h] = lp

    def conflict(self, lp: LoadedPolicy) -> tuple[LoadedPolicy, str] | None:
        """The holder ``lp`` clashes with and why (``lp``'s file and line first), or None.
        Names no key material."""
        holder = self.tenants.get(lp.tenant)
        if holder is not None:
            return holder, (
                f"{_where(lp, ('tenant',))}: tenant '{lp.tenant}' is already defined by "
                f"{_where(holder, ('tenant',))}"
            )
        for h in sorted(lp.key_hashes | lp.admin_key_hashes):
            holder = self.keys.get(h)
            if holder is not None:
                label, loc = _key_label(lp, h)
                return holder, (
                    f"{_where(lp, loc)}: {label} is already a key of tenant "
                    f"'{holder.tenant}' ({holder.path}); a key must name exactly one tenant"
                )
        return None


def _where(lp: LoadedPolicy, loc: tuple[int | str, ...]) -> str:
    """``file:line`` of the field ``loc`` of the policy ``lp``."""
    try:
        text = lp.path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return str(lp.path)
    return f"{lp.path}:{line_of(text, loc)}"


def _key_label(lp: LoadedPolicy, key_hash: str) -> tuple[str, tuple[int | str, ...]]:
    for field in ("keys", "admin_keys"):
        hashes: list[str] = getattr(lp.policy, field)
        if key_hash in hashes:
            return f"{field}[{hashes.index(key_hash)}]", (field, hashes.index(key_hash))
    return f"a key from key_env {lp.policy.key_env}", ("key_env",)


def mutual_clashes(candidates: list[Candidate]) -> dict[Path, str]:
    """New files (no last good policy) that claim the same tenant or key: all refused.

    With nothing served yet (start-up, or two files added in one scan) no file has a better
    claim than another; serving the one whose name sorts first would hand a tenant's key
    (its clients, index and traces) to whoever adds a file that sorts earlier. Every file in
    such a clash is refused, each error names the other file and tenant, so both owners
    see it (logs, their admin key's ``/readyz``). Against a file already served, a new file
    is refused by :func:`resolve` and the served one stays.
    """
    fresh = [c for c in candidates if c.last_good is None]
    refused: dict[Path, str] = {}
    for i, a in enumerate(fresh):
        for b in fresh[i + 1 :]:
            for mine, other in ((a, b), (b, a)):
                claims = _Claims()
                claims.add(other.new)
                clash = claims.conflict(mine.new)
                if clash is None:
                    break
                why = f"{clash[1]}: both files are refused until one of them is changed"
                refused.setdefault(mine.path, why)
    return refused


def resolve(
    incumbents: list[LoadedPolicy], candidates: list[Candidate]
) -> tuple[set[Path], dict[Path, str]]:
    """Decide which candidates (new file contents) are served.

    Incumbents (unchanged files, last good policies of bad edits) were consistent in
    the previous snapshot and always stay. Candidates are placed in path order; one
    that clashes is rejected and its last good policy stays. If that last good policy
    clashes with a candidate accepted earlier in this pass, the earlier one is
    rejected too and the pass restarts (at most once per candidate).
    """
    forced: dict[Path, str] = {}  # candidate → reason it falls back to its last good
    while True:
        claims = _Claims()
        for lp in incumbents:
            claims.add(lp)
        for cand in candidates:
            if cand.path in forced and cand.last_good is not None:
                claims.add(cand.last_good)
        accepted: set[Path] = set()
        rejected: dict[Path, str] = dict(forced)
        restart = False
        for cand in candidates:
            if cand.path in forced:
                continue
            clash = claims.conflict(cand.new)
            if clash is None:
                claims.add(cand.new)
                accepted.add(cand.path)
                continue
            rejected[cand.path] = clash[1]
            if cand.last_good is None:
                continue
            fallback_clash = claims.conflict(cand.last_good)
            if fallback_clash is None:
                claims.add(cand.last_good)
                continue
            holder = fallback_clash[0]
            forced[cand.path] = rejected[cand.path]
            if holder.path != cand.path and holder.path in accepted:
                holder_reason = _Claims()
                holder_reason.add(cand.last_good)
                why = holder_reason.conflict(holder)
                forced[holder.path] = why[1] if why else f"{holder.path}: conflicts"
            restart = True
            break
        if not restart:
            return accepted, rejected


def build_snapshot(states: dict[Path, FileState]) -> Snapshot:
    served = [s.serving for _, s in sorted(states.items()) if s.serving is not None]
    refused = sharing_errors(served)
    by_tenant: dict[str, LoadedPolicy] = {}
    by_key: dict[str, str] = {}
    by_admin: dict[str, str] = {}
    for path, state in sorted(states.items()):
        lp = state.serving
        if lp is None or path in refused:
            continue
        by_tenant[lp.tenant] = lp
        by_key.update(dict.fromkeys(lp.key_hashes, lp.tenant))
        by_admin.update(dict.fromkeys(lp.admin_key_hashes, lp.tenant))
    return Snapshot(by_tenant, by_key, by_admin, refused)


def log_changes(old: dict[Path, FileState], new: dict[Path, FileState]) -> None:
    for path in sorted(old.keys() - new.keys()):
        gone = old[path].serving
        if gone is not None:
            log.info("policy_removed", tenant=gone.tenant, path=str(path))
    for path, state in sorted(new.items()):
        before = old.get(path)
        if state.serving is not None and (before is None or before.serving is not state.serving):
            log.info(
                "policy_loaded",
                tenant=state.serving.tenant,
                policy_id=state.serving.policy_id,
                previous=before.serving.policy_id if before and before.serving else None,
                path=str(path),
            )
        if state.error and (
            before is None or (before.error, before.digest) != (state.error, state.digest)
        ):
            kept = state.serving.policy_id if state.serving else None
            log.warning(
                "policy_rejected",
                path=str(path),
                error=state.error,
                kept_last_good=kept,
            )
