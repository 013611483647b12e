"""``groundproxy ingest``, ``delete``, ``check`` and ``models``: the index, the guard and the
verifier models without a server."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Literal

from groundproxy.guards.errors import BadRequestError, NotFoundError
from groundproxy.proxy import storage as backends
from groundproxy.retrieval.embedder import load_embedder


def _embedder_name() -> str:
    """The embedder the server uses too (``GROUNDPROXY_EMBEDDER``, default ``minilm``)."""
    return os.environ.get("GROUNDPROXY_EMBEDDER") or "minilm"


def ingest(data: Path, tenant: str, paths: list[Path], progress: bool = True) -> int:
    store = backends.open_storage(data, os.environ.get("GROUNDPROXY_DATABASE_URL"))
    result = backends.ingest_paths(store, tenant, paths, load_embedder(_embedder_name()), progress)
    print(json.dumps({"tenant": tenant, **dataclasses.asdict(result)}))
    return 0


def delete(data: Path, tenant: str, doc_ids: list[str]) -> int:
    store = backends.open_storage(data, os.environ.get("GROUNDPROXY_DATABASE_URL"))
    result = backends.delete_documents(store, tenant, doc_ids)
    print(json.dumps({"tenant": tenant, **dataclasses.asdict(result)}))
    return 0 if not result.missing else 1


def check(
    data: Path,
    policies: Path,
    tenant: str,
    answer: str,
    question: str | None,
    context_file: Path | None,
) -> int:
    # Imported here: the guard pulls in scikit-learn, which `ingest` and `delete` don't need.
    from groundproxy.guards.pipeline import run_guard
    from groundproxy.guards.report import report_body
    from groundproxy.models.registry import VerifierRegistry, models_dir_for
    from groundproxy.policies.loader import PolicyStore
    from groundproxy.proxy.calibration import CalibrationCache
    from groundproxy.retrieval.tenant_index import TenantIndex

    store = PolicyStore(policies)
    for err in store.load():
        print(f"warning: {err}", file=sys.stderr)
    loaded = store.get(tenant)
    if loaded is None:
        raise NotFoundError(f"no policy for tenant '{tenant}' in {policies}")
    policy = loaded.policy
    context: list[tuple[str, str]] = []
    if context_file is not None:
        try:
            context.append(("user", context_file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequestError(f"cannot read context file {context_file}: {exc}") from exc
    embedder = load_embedder(_embedder_name())
    index = TenantIndex.open(data, policy.index_name)
    verifier = VerifierRegistry(models_dir_for(data)).get(policy.verifier.model)
    report = run_guard(
        answer,
        question=question,
        context_messages=context,
        policy=policy,
        verifier=verifier,
        embedder=embedder,
        index=index if index.count > 0 else None,
        # verifier.threshold: calibrated → the tenant's calibration file (an error without it)
        threshold=CalibrationCache(data).threshold_for(policy, verifier.name),
    )
    print(json.dumps(report_body(report, loaded.policy_id), indent=2, ensure_ascii=False))
    return 0


def models_build(
    source: str,
    name: str,
    models_dir: Path | None,
    data: Path,
    kind: Literal["auto", "nli", "causal-lm"],
    max_length: int | None,
    pair_order: Literal["auto", "evidence-claim", "claim-evidence"],
    force: bool,
) -> int:
    from groundproxy.models.build import build_model, format_report
    from groundproxy.models.registry import models_dir_for

    folder = models_dir if models_dir is not None else models_dir_for(data)
    meta = build_model(source, name, folder, kind, max_length, pair_order, force)
    print(format_report(meta, folder / name))
    return 0


def models_list(models_dir: Path | None, data: Path) -> int:
    from groundproxy.models.built_verifier import load_build
    from groundproxy.models.registry import BUILTIN_NAMES, built_models, models_dir_for

    folder = models_dir if models_dir is not None else models_dir_for(data)
    for name in sorted(BUILTIN_NAMES):
        print(f"{name:<24}built-in")
    for name in built_models(folder):
        meta = load_build(folder / name)
        print(f"{name:<24}{meta['kind']:<10}{meta.get('source', '')}  ({folder / name})")
    return 0
