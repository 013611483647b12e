"""``groundproxy ingest``, ``delete``, ``check`` and ``models``: the index, the guard and the
verifier models without a server."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from groundproxy.errors import BadRequestError, NotFoundError
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage import backends
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.ingest import FileOptions

if TYPE_CHECKING:
    from groundproxy.guards.types import ClaimResult


def ingest(args: argparse.Namespace, settings: Settings) -> int:
    """``groundproxy ingest``: with the server's embedder, storage and cache (``Settings``)."""
    store = backends.open_storage(settings.data, settings.database_url)
    result = backends.ingest_paths(
        store,
        args.tenant,
        args.paths,
        load_embedder(settings.embedder, settings.cache),
        not args.no_progress,
        FileOptions(args.skip_errors, args.follow_symlinks),
    )
    for line in result.skipped:
        print(f"skipped {line}", file=sys.stderr)
    print(json.dumps({"tenant": args.tenant, **dataclasses.asdict(result)}))
    return 0


def delete(data: Path, tenant: str, doc_ids: list[str], database_url: str | None = None) -> int:
    store = backends.open_storage(data, database_url)
    result = backends.delete_documents(store, tenant, doc_ids)
    print(json.dumps({"tenant": tenant, **dataclasses.asdict(result)}))
    return 0 if not result.missing else 1


def check(args: argparse.Namespace, settings: Settings) -> int:
    """``groundproxy check``: prints the report (with ``answer``: the text to return) as JSON
    on stdout, one line for people on stderr; exit 1 when ``--fail-on`` is given and a claim
    has that verdict."""
    # Imported here: the guard pulls in scikit-learn, which `ingest` and `delete` don't need.
    from groundproxy.guards import report_body
    from groundproxy.policies.loader import PolicyStore
    from groundproxy.proxy.serving.guarding import build_guard

    data, policies, tenant = settings.data, settings.policies, args.tenant
    context_file: Path | None = args.context_file
    store = PolicyStore(policies)
    for err in store.load():
        print(f"warning: {err}", file=sys.stderr)
    loaded = store.get(tenant)
    if loaded is None:
        raise NotFoundError(f"no policy for tenant '{tenant}' in {policies}")
    context: list[tuple[str, str]] = []
    if context_file is not None:
        try:
            context.append(("user", context_file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequestError(f"cannot read context file {context_file}: {exc}") from exc
    # The served path: the tenant's index, its calibrated threshold when the policy says so,
    # from the storage the server uses (Postgres when ``database_url`` is set).
    served = Settings(
        data=data,
        policies=policies,
        batch_window_ms=0,
        embedder=settings.embedder,
        cache=settings.cache,
    )
    with (
        backends.started_storage(data, settings.database_url) as storage,
        build_guard(served, storage=storage) as guard,
    ):
        report = guard.guard_sync(args.answer, args.question, context, loaded.policy, cache=False)
    body = {**report_body(report, loaded.policy_id), "answer": report.text}
    print(json.dumps(body, indent=2, ensure_ascii=False))
    trust = "no claims" if report.reported_trust is None else f"trust {report.trust:.3f}"
    print(f"{report.action} ({trust}): {report.text}", file=sys.stderr)
    return 1 if fails(report.claims, args.fail_on) else 0


# ``--fail-on``: the verdicts that make ``check`` exit 1 (unverifiable includes contradicted).
FAIL_ON = {"contradicted": {"contradicted"}, "unverifiable": {"contradicted", "unverifiable"}}


def fails(claims: list[ClaimResult], fail_on: str | None) -> bool:
    """Whether any claim has a verdict ``--fail-on`` names (never without the flag)."""
    bad = FAIL_ON.get(fail_on or "", set())
    return any(c.verdict in bad for c in claims)


def models_build(args: argparse.Namespace, settings: Settings) -> int:
    """``groundproxy models build``."""
    from groundproxy.models.build import BuildSpec, build_model, format_report
    from groundproxy.models.registry import models_dir_for

    folder = (
        settings.models_dir if settings.models_dir is not None else models_dir_for(settings.data)
    )
    spec = BuildSpec(args.kind, args.max_length, args.pair_order)
    meta = build_model(args.source, args.name, folder, spec, force=args.force)
    print(format_report(meta, folder / args.name))
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
