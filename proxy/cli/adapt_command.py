"""The ``groundproxy calibrate --fit`` command line (:mod:`groundproxy.proxy.cli.adapt`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundproxy.errors import BadRequestError, IndexStoreError
from groundproxy.guards import TOKEN_FEATURES
from groundproxy.policies.loader import PolicyStore
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.cli.adapt import FitJob, WarningsFired, fit_tenant
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import started_storage
from groundproxy.retrieval.generations import read_current
from groundproxy.retrieval.names import validate_tenant
from groundproxy.retrieval.sentence_tokens import OFFSETS_FILE


def tenant_policy(policies: Path, tenant: str) -> tuple[Policy, str]:
    """The policy the proxy serves the tenant with (defaults when it has no file)."""
    if policies.is_dir():
        store = PolicyStore(policies)
        store.load()
        loaded = store.get(tenant)
        if loaded is not None:
            return loaded.policy, loaded.policy_id
    return local_policy(tenant), "defaults"


def index_stores_token_states(data: Path, policy: Policy) -> bool | None:
    """Does the policy's index under ``data`` store its sentences' token states
    (retrieval.sentence_tokens)? None when the policy reads no index or there is none there.
    Reads the live generation's file names only (the index itself is not loaded)."""
    name = policy.retrieval.index
    if name is None:
        return None
    try:
        pointer = read_current(Path(data) / name, name)
    except IndexStoreError:
        return False
    if pointer is None:  # none here (not ingested yet, or on PostgreSQL)
        return None
    return (Path(data) / name / pointer.generation / OFFSETS_FILE).is_file()


def token_cost_note(features: Sequence[str], stored: bool | None) -> str | None:
    """What an adapter reading the token alignment costs per answer, for the fit's output
    (``stored``: :func:`index_stores_token_states`); None when it reads none. The figures
    are ``bench/signal_cost.py``'s."""
    used = [n for n in features if n in TOKEN_FEATURES]
    if not used:
        return None
    head = f"note: this adapter reads the token alignment ({', '.join(used)})"
    if stored is False:
        return (
            f"{head}, and the tenant's index stores no token states (written before ingest "
            "stored them, or with GROUNDPROXY_TOKEN_STATES=0): its evidence sentences are "
            "embedded once more for every answer until an ingest meets them again (documents "
            "added or changed from now on get them; delete and ingest the others again), or "
            "refit with --no-token-features (what each costs: python -m bench.signal_cost)"
        )
    return (
        f"{head}: it reuses the token states of the verifier's own pass and those the index "
        "stored at ingest, no extra model pass (what it costs: python -m bench.signal_cost)"
    )


def held_back_line(fit: dict[str, Any]) -> str:
    """What the held-back comparison found (:mod:`groundproxy.proxy.cli.refit`)."""
    h = fit["held_back"]
    head = f"held back {h['n']} reviewers' labels ({h['n_hallucinated']} hallucinated)"
    if "difference" not in h:
        return f"{head}: {h['why']}"
    verdict = "replaces it" if h["replaced"] else "does not replace it"
    line = (
        f"{head}: refit {h['candidate_balanced_accuracy']:.4f} vs {h['in_force']} in force "
        f"{h['in_force_balanced_accuracy']:.4f}, difference {h['difference']:+.4f}, noise SE "
        f"{h['noise_se']:.4f} ({h['rule']}): {verdict}"
    )
    if "decides_alone" in fit:
        alone = "may" if fit["decides_alone"] else "may not"
        line += f"; it {alone} decide answers alone (judge gate, reviewers' labels only)"
    return line


def run_fit_command(args: argparse.Namespace, settings: Settings) -> int:
    """``calibrate --fit``; the labels are verified against the tenant's index where the
    server keeps it (PostgreSQL when ``settings.database_url`` is set)."""
    data = settings.data
    tenant = validate_tenant(args.tenant)
    if args.alpha is not None and not 0.0 < args.alpha < 1.0:
        raise BadRequestError("--alpha must be in (0, 1)", param="alpha")
    policy, source = tenant_policy(settings.policies, tenant)
    job = FitJob(tenant, data, policy, args.file, args.alpha, args.cal_fraction, args.seed,
                 token_features=not args.no_token_features,
                 accept_warnings=args.accept_warnings)  # fmt: skip
    with started_storage(data, settings.database_url) as storage:
        try:
            c = fit_tenant(job, storage)
        except WarningsFired as fired:
            print(
                f"refused: {len(fired.warnings)} warning(s) about the labels fired (above); "
                f"nothing written, the decision in force for tenant {tenant} stays — check "
                "the labels, or ship the fit anyway with --accept-warnings",
                file=sys.stderr,
            )
            return 2
    f = c["fit"]
    print(held_back_line(f))
    if c.get("decision") == "keep":
        print(
            f"kept {f['held_back']['in_force']} for tenant {tenant} (policy {source}): the "
            "refit does not beat it on the reviewers' labels held back; nothing written"
        )
        if args.json:
            print(json.dumps(c))
        return 0
    if c.get("decision") == "zero_shot":
        print(
            f"kept the zero-shot decision for tenant {tenant} (policy {source}, verifier "
            f"{c['verifier']}): {f['n']} labelled answers ({f['n_hallucinated']} "
            f"hallucinated); on the {f['n_fit']} fitted on, an adapter's cross-fitted balanced "
            f"accuracy {f.get('cross_fitted_balanced_accuracy', float('nan')):.4f} vs the "
            f"zero-shot decision's {f.get('zero_shot_fit_balanced_accuracy', float('nan')):.4f}"
            f" (margin {f.get('margin', 0):g}), and the held-back test above; no adapter is in "
            "force"
        )
        print(f"wrote {c['path']} (a zero-shot record: served from the next request)")
        if args.json:
            print(json.dumps(c))
        return 0
    print(
        f"adapter v{c['version']} for tenant {tenant} (policy {source}, verifier "
        f"{c['verifier']}): {f['n']} labelled answers ({f['n_hallucinated']} hallucinated); "
        f"features '{f['feature_set']}' ({len(c['features'])}), L2 C={f['C']:g} (cross-fitted)"
    )
    extra = (
        f", out-of-fold balanced accuracy {f['oof_balanced_accuracy']:.4f}"
        if ("oof_balanced_accuracy" in f)
        else f"; {f.get('guarantee', '')}"
    )
    honest = (
        f"; held-out balanced accuracy {f['cross_fitted_balanced_accuracy']:.4f}"
        if "cross_fitted_balanced_accuracy" in f
        else ""
    )
    print(
        f"threshold P(hallucinated) > {c['threshold']:.4f} ({f['threshold_rule']}){extra}"
        f"{honest}; zero-shot rule on the same answers {f['zero_shot_balanced_accuracy']:.4f}"
    )
    note = token_cost_note(c["features"], index_stores_token_states(data, policy))
    if note:
        print(note)
    print(f"wrote {c['path']} (in force: served from the next request)")
    if args.json:
        print(json.dumps(c))
    return 0
