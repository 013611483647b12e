"""PolicyStore: lookups, reload semantics, atomic swaps, watcher and SIGHUP."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from groundproxy.errors import PolicyError
from groundproxy.policies.keys import hash_key
from groundproxy.policies.loader import PolicyStore

RAW = {"acme": "sk-acme-store-key", "globex": "sk-globex-store-key", "initech": "sk-ini-key"}
ADMIN_RAW = "sk-acme-store-admin"


def policy_text(tenant: str, *, top_k: int = 3, keys: list[str] | None = None) -> str:
    hashes = [hash_key(k) for k in (keys if keys is not None else [RAW[tenant]])]
    admin = [hash_key(ADMIN_RAW)] if tenant == "acme" else []
    return (
        f"tenant: {tenant}\nkeys: {hashes}\nadmin_keys: {admin}\n"
        f"upstream: {{model: openai/m}}\nretrieval: {{top_k: {top_k}}}\n"
    )


def write(
    directory: Path,
    tenant: str,
    text: str | None = None,
    *,
    top_k: int = 3,
    keys: list[str] | None = None,
) -> Path:
    path = directory / f"{tenant}.yaml"
    if text is None:
        text = policy_text(tenant, top_k=top_k, keys=keys)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> PolicyStore:
    write(tmp_path, "acme")
    write(tmp_path, "globex")
    s = PolicyStore(tmp_path)
    assert s.load() == []
    return s


def wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def top_k(store: PolicyStore, tenant: str = "acme") -> int | None:
    lp = store.get(tenant)
    return None if lp is None else lp.policy.retrieval.top_k


def no_key_material(logs: Sequence[Mapping[str, Any]]) -> None:
    text = repr(logs)
    assert "sha256:" not in text
    for raw in [*RAW.values(), ADMIN_RAW]:
        assert raw not in text


def test_load_and_lookups(store: PolicyStore, tmp_path: Path) -> None:
    assert store.tenants() == ["acme", "globex"]
    acme = store.lookup_key(RAW["acme"])
    assert acme is not None and acme.tenant == "acme"
    assert store.lookup_key(RAW["globex"]) is store.get("globex")
    assert store.lookup_key("nope") is None and store.lookup_key("") is None
    assert store.lookup_key(hash_key(RAW["acme"])) is None  # a hash is not a key
    admin = store.lookup_admin_key(ADMIN_RAW)
    assert admin is not None and admin.tenant == "acme"
    assert store.lookup_admin_key(RAW["acme"]) is None
    assert store.get("initech") is None


def test_load_reports_bad_files_and_fails_only_when_nothing_loads(tmp_path: Path) -> None:
    write(tmp_path, "acme")
    (tmp_path / "broken.yml").write_text("tenant: broken\nbogus: 1\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    errors = PolicyStore(tmp_path).load()
    assert len(errors) == 1 and errors[0].startswith(f"{tmp_path / 'broken.yml'}:1: ")
    (tmp_path / "acme.yaml").unlink()
    with pytest.raises(PolicyError, match="no policy loaded"):
        PolicyStore(tmp_path).load()
    with pytest.raises(PolicyError, match="does not exist"):
        PolicyStore(tmp_path / "missing").load()


def test_bad_edit_keeps_last_good_and_logs_without_keys(store: PolicyStore, tmp_path: Path) -> None:
    before = store.get("acme")
    with capture_logs() as logs:
        write(tmp_path, "acme", policy_text("acme") + "retreival: {}\n")
        errors = store.reload()
    assert len(errors) == 1 and "did you mean 'retrieval'?" in errors[0]
    assert store.get("acme") is before
    assert store.lookup_key(RAW["acme"]) is before
    rejected = [e for e in logs if e["event"] == "policy_rejected"]
    assert len(rejected) == 1 and rejected[0]["log_level"] == "warning"
    assert rejected[0]["error"] == errors[0]
    assert before is not None and rejected[0]["kept_last_good"] == before.policy_id
    no_key_material(logs)
    # A reload with nothing new reports the error again but does not log it again.
    with capture_logs() as logs:
        assert store.reload() == errors
    assert not [e for e in logs if e["event"] == "policy_rejected"]


def test_reload_picks_up_edit_add_and_delete(store: PolicyStore, tmp_path: Path) -> None:
    write(tmp_path, "acme", top_k=5)  # same size as before, same timestamp tick
    write(tmp_path, "initech")
    (tmp_path / "globex.yaml").unlink()
    with capture_logs() as logs:
        assert store.reload() == []
    assert top_k(store) == 5
    assert store.tenants() == ["acme", "initech"]
    assert store.lookup_key(RAW["globex"]) is None
    initech = store.lookup_key(RAW["initech"])
    assert initech is not None and initech.tenant == "initech"
    events = sorted(e["event"] for e in logs)
    assert events == ["policy_loaded", "policy_loaded", "policy_removed"]
    no_key_material(logs)


def test_bad_edit_then_fix(store: PolicyStore, tmp_path: Path) -> None:
    write(tmp_path, "acme", "tenant: acme\nkeys: [\n")
    assert len(store.reload()) == 1 and top_k(store) == 3
    write(tmp_path, "acme", top_k=7)
    assert store.reload() == [] and top_k(store) == 7


def test_key_claimed_by_two_tenants(store: PolicyStore, tmp_path: Path) -> None:
    globex = store.get("globex")
    write(tmp_path, "globex", keys=[RAW["globex"], RAW["acme"]])
    errors = store.reload()
    assert len(errors) == 1
    assert re.match(
        rf"{re.escape(str(tmp_path / 'globex.yaml'))}:\d+: keys\[1\] is already a key of", errors[0]
    )
    assert store.get("globex") is globex
    lp = store.lookup_key(RAW["acme"])
    assert lp is not None and lp.tenant == "acme"
    # A new file stealing a key is not served at all.
    write(tmp_path, "initech", keys=[RAW["initech"], RAW["globex"]])
    assert len(store.reload()) == 2 and store.get("initech") is None
    # Once acme gives the key up, globex's pending change goes through.
    write(tmp_path, "acme", keys=["sk-acme-other"])
    assert len(store.reload()) == 1
    lp = store.lookup_key(RAW["acme"])
    assert lp is not None and lp.tenant == "globex"


def test_swap_between_files_in_one_reload(store: PolicyStore, tmp_path: Path) -> None:
    # acme's new version takes globex's key while globex's new version is broken:
    # globex keeps its last good policy (and the key), so acme's change is rejected.
    write(tmp_path, "acme", keys=[RAW["acme"], RAW["globex"]])
    write(tmp_path, "globex", "tenant: globex\nnope: 1\n")
    errors = store.reload()
    assert len(errors) == 2
    lp = store.lookup_key(RAW["globex"])
    assert lp is not None and lp.tenant == "globex"
    assert store.lookup_key(RAW["acme"]) is not None


def test_clash_with_a_fallback_rejects_both_changes(store: PolicyStore, tmp_path: Path) -> None:
    # acme's change (checked first) takes globex's key; globex's change clashes with
    # initech, so globex falls back to its last good policy, which holds that key:
    # acme's change must be rejected too.
    write(tmp_path, "initech")
    store.reload()
    acme, globex = store.get("acme"), store.get("globex")
    write(tmp_path, "acme", keys=[RAW["acme"], RAW["globex"]])
    write(tmp_path, "globex", keys=[RAW["globex"], RAW["initech"]])
    errors = store.reload()
    assert len(errors) == 2
    assert store.get("acme") is acme and store.get("globex") is globex
    lp = store.lookup_key(RAW["globex"])
    assert lp is not None and lp.tenant == "globex"


def test_concurrent_lookups_during_reloads(store: PolicyStore, tmp_path: Path) -> None:
    failures: list[str] = []
    stop = threading.Event()
    lookups = 0

    def reader() -> None:
        nonlocal lookups
        while not stop.is_set() and lookups < 1_000_000:
            for tenant in ("acme", "globex"):
                lp = store.lookup_key(RAW[tenant])
                if lp is None or lp.tenant != tenant:
                    failures.append(f"{tenant}: {lp}")
            lookups += 1
            time.sleep(0)  # let the reloading thread run

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for i in range(200):
            write(tmp_path, "acme", top_k=3 + i % 2)
            assert store.reload() == []
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert failures == [] and lookups > 0
    assert top_k(store) == 4


def test_sighup_reloads(store: PolicyStore, tmp_path: Path) -> None:
    old = signal.getsignal(signal.SIGHUP)
    try:
        assert store.install_sighup() is True
        write(tmp_path, "acme", top_k=9)
        os.kill(os.getpid(), signal.SIGHUP)
        assert wait_for(lambda: top_k(store) == 9)
        store.uninstall_sighup()
        assert signal.getsignal(signal.SIGHUP) == old
    finally:
        signal.signal(signal.SIGHUP, old)


def test_sighup_off_main_thread_needs_a_loop(store: PolicyStore) -> None:
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(store.install_sighup()))
    t.start()
    t.join(timeout=5)
    assert result == [False]


async def test_sighup_via_running_loop(store: PolicyStore, tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    try:
        assert await asyncio.to_thread(store.install_sighup, loop) is True
        await asyncio.sleep(0.05)  # the handler is added on the loop's thread
        write(tmp_path, "acme", top_k=8)
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(250):
            if top_k(store) == 8:
                break
            await asyncio.sleep(0.02)
        assert top_k(store) == 8
    finally:
        loop.remove_signal_handler(signal.SIGHUP)


def test_watcher_picks_up_changes(store: PolicyStore, tmp_path: Path) -> None:
    store.start_watching(interval_s=0.05)
    try:
        write(tmp_path, "acme", top_k=6)
        assert wait_for(lambda: top_k(store) == 6)
        write(tmp_path, "initech")
        assert wait_for(lambda: store.get("initech") is not None)
        (tmp_path / "globex.yaml").unlink()
        assert wait_for(lambda: store.get("globex") is None)
    finally:
        store.stop_watching()
