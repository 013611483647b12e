"""``groundproxy ingest``, ``delete``, ``check`` and ``models``: the index, the guard and the
verifier models without a server."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from groundproxy.errors import BadRequestError, NotFoundError
from groundproxy.proxy.storage import backends
from groundproxy.retrieval.embedder import load_embedder

if TYPE_CHECKING:
    from groundproxy.guards.types import ClaimResult


def ingest(
    data: Path,
    tenant: str,
    paths: list[Path],
    progress: bool = True,
    embedder_name: str = "minilm",
    skip_errors: bool = False,
    follow_symlinks: bool = False,
    database_url: str | None = None,
    cache: Path | None = None,
) -> int:
    """``embedder_name``/``database_url``/``cache``: the server's too (``Settings``)."""
    store = backends.open_storage(data, database_url)
    result = backends.ingest_paths(
        store,
        tenant,
        paths,
        load_embedder(embedder_name, cache),
        progress,
        skip_errors=skip_errors,
        follow_symlinks=follow_symlinks,
    )
    for line in result.skipped:
        print(f"skipped {line}", file=sys.stderr)
    print(json.dumps({"tenant": tenant, **dataclasses.asdict(result)}))
    return 0


def delete(data: Path, tenant: str, doc_ids: list[str], database_url: str | None = None) -> int:
    store = backends.open_storage(data, database_url)
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
    embedder_name: str = "minilm",
    cache: Path | None = None,
    fail_on: str | None = None,
    database_url: str | None = None,
) -> int:
    """Prints the report (with ``answer``: the text to return) as JSON on stdout, one line
    for people on stderr; exit 1 when ``fail_on`` is given and a claim has that verdict."""
    # Imported here: the guard pulls in scikit-learn, which `ingest` and `delete` don't need.
    from groundproxy.guards import report_body
    from groundproxy.policies.loader import PolicyStore
    from groundproxy.proxy.serving.guarding import build_guard
    from groundproxy.proxy.settings import Settings

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
    settings = Settings(
        data=data, policies=policies, batch_window_ms=0, embedder=embedder_name, cache=cache
    )
    with (
        backends.started_storage(data, database_url) as storage,
        build_guard(settings, storage=storage) as guard,
    ):
        report = guard.guard_sync(answer, question, context, loaded.policy, cache=False)
    body = {**report_body(report, loaded.policy_id), "answer": report.text}
    print(json.dumps(body, indent=2, ensure_ascii=False))
    trust = "no claims" if report.reported_trust is None else f"trust {report.trust:.3f}"
    print(f"{report.action} ({trust}): {report.text}", file=sys.stderr)
    return 1 if fails(report.claims, fail_on) else 0


# ``--fail-on``: the verdicts that make ``check`` exit 1 (unverifiable includes contradicted).
FAIL_ON = {"contradicted": {"contradicted"}, "unverifiable": {"contradicted", "unverifiable"}}


def fails(claims: list[ClaimResult], fail_on: str | None) -> bool:
    """Whether any claim has a verdict ``--fail-on`` names (never without the flag)."""
    bad = FAIL_ON.get(fail_on or "", set())
    return any(c.verdict in bad for c in claims)


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
