"""The ``groundproxy calibrate --fit`` command line (:mod:`groundproxy.proxy.adapt`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from groundproxy.errors import BadRequestError
from groundproxy.guards import TOKEN_FEATURES
from groundproxy.policies.loader import PolicyStore
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.adapt import fit_tenant
from groundproxy.retrieval.names import validate_tenant


def tenant_policy(policies: Path, tenant: str) -> tuple[Policy, str]:
    """The policy the proxy serves the tenant with (defaults when it has no file)."""
    if policies.is_dir():
        store = PolicyStore(policies)
        store.load()
        loaded = store.get(tenant)
        if loaded is not None:
            return loaded.policy, loaded.policy_id
    return local_policy(tenant), "defaults"


def token_cost_note(features: Sequence[str]) -> str | None:
    """What an adapter reading the token alignment costs per answer (bench/signal_cost.py,
    2 cores), for the fit's output; None when it reads none."""
    used = [n for n in features if n in TOKEN_FEATURES]
    if not used:
        return None
    return (
        f"note: this adapter reads the token alignment ({', '.join(used)}): about 13 ms p50 per "
        "5-claim answer when the evidence is the request's own context, about 215 ms when it "
        "comes from the tenant's index (its sentences are embedded again); refit with "
        "--no-token-features if that matters more than its accuracy"
    )


def run_fit_command(args: argparse.Namespace, data: Path, policies: Path) -> int:
    tenant = validate_tenant(args.tenant)
    if args.alpha is not None and not 0.0 < args.alpha < 1.0:
        raise BadRequestError("--alpha must be in (0, 1)", param="alpha")
    policy, source = tenant_policy(policies, tenant)
    c = fit_tenant(
        tenant,
        data=data,
        policy=policy,
        labels_file=args.file,
        alpha=args.alpha,
        cal_fraction=args.cal_fraction,
        seed=args.seed,
        token_features=not args.no_token_features,
    )
    f = c["fit"]
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
    print(
        f"threshold P(hallucinated) > {c['threshold']:.4f} ({f['threshold_rule']}){extra}; "
        f"zero-shot rule on the same answers {f['zero_shot_balanced_accuracy']:.4f}"
    )
    note = token_cost_note(c["features"])
    if note:
        print(note)
    print(f"wrote {c['path']} (in force: served from the next request)")
    if args.json:
        print(json.dumps(c))
    return 0
