"""``groundproxy`` — one entry point: serve, ingest, delete, check, eval, demo, calibrate,
models, hash-key.

Flags override :class:`~groundproxy.proxy.settings.Settings`, which reads the
``GROUNDPROXY_*`` environment variables: this module reads none itself (a flag left out is
``None`` here and the setting, env or default, fills it in).

A bad input (a flag, a file, a policy) is one line on stderr, ``groundproxy CMD: error: …``,
and exit code 2; anything else that fails is one line too, exit code 1. ``--debug`` adds the
traceback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from groundproxy.errors import BadRequestError, GroundproxyError
from groundproxy.proxy.settings import Settings

_FOLDERS = {
    "data": "index folder (default $GROUNDPROXY_DATA, then ./data)",
    "policies": "policy folder (default $GROUNDPROXY_POLICIES, then ./policies)",
    "models-dir": "default $GROUNDPROXY_MODELS_DIR, then <data>/_models",
}


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (``--help`` shows the usage), exit 2;
    every command takes ``--debug`` (tracebacks on stderr)."""

    def __init__(self, *args: object, debug_flag: bool = True, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if debug_flag:  # every sub-command (argparse builds them with this class)
            self.add_argument("--debug", action="store_true", help="print tracebacks")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help shows the usage)\n")


def version() -> str:
    """The installed package's version (``groundproxy --version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("groundproxy")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "(not installed)"


def _positive(text: str) -> int:
    """An integer ≥ 1 (``--limit``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_folders(p: argparse.ArgumentParser, *flags: str) -> None:
    """Folder flags (``--data``...): None when not given, so that ``Settings`` decides."""
    for flag in flags:
        p.add_argument(f"--{flag}", type=Path, default=None, help=_FOLDERS[flag])


def _settings(args: argparse.Namespace) -> Settings:
    """The settings, with the flags this command was given (those not None) on top."""
    flags = ("host", "port", "policies", "data", "log_level", "models_dir", "workers")
    given = {name: getattr(args, name) for name in flags if getattr(args, name, None) is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = "_".join(str(p) for p in err["loc"])
        raise BadRequestError(f"setting {name} (GROUNDPROXY_{name.upper()}): {err['msg']}") from exc


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="groundproxy", description="OpenAI-compatible guardrail proxy", debug_flag=False
    )
    parser.add_argument(
        "--version", action="version", version=f"groundproxy {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the proxy")
    p.add_argument("--host", default=None, help="default $GROUNDPROXY_HOST, then 127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default $GROUNDPROXY_PORT, then 8080")
    _add_folders(p, "policies", "data")
    p.add_argument("--log-level", default=None, help="default $GROUNDPROXY_LOG_LEVEL, then info")
    p.add_argument(
        "--workers", type=int, default=None, help="processes (default $GROUNDPROXY_WORKERS, then 1)"
    )

    p = sub.add_parser("ingest", help="add or replace documents in a tenant's index")
    _add_folders(p, "data")
    p.add_argument("--tenant", required=True, help="the tenant whose index gets the documents")
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        help="files or folders (.md, .txt, .html, .pdf, .jsonl …; folders recursively)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--skip-errors", action="store_true", help="skip (and list) unreadable files")
    p.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="ingest symlinks that point outside the given folder",
    )

    p = sub.add_parser("delete", help="delete documents from a tenant's index")
    _add_folders(p, "data")
    p.add_argument("--tenant", required=True, help="the tenant whose index holds them")
    p.add_argument("doc_ids", nargs="+", help="document ids, as ingest printed them")

    p = sub.add_parser("check", help="guard one answer without an upstream; prints JSON")
    _add_folders(p, "data", "policies")
    p.add_argument("--tenant", required=True, help="whose policy and index to guard with")
    p.add_argument("--answer", required=True, help="the answer text to verify")
    p.add_argument("--question", default=None, help="the question it answers (optional)")
    p.add_argument(
        "--context-file",
        type=Path,
        default=None,
        help="a text file used as the request's own context (evidence beside the index)",
    )
    p.add_argument(
        "--fail-on",
        choices=["contradicted", "unverifiable"],
        default=None,
        help="exit 1 when a claim is contradicted (or, with unverifiable, either)",
    )

    p = sub.add_parser("eval", help="measure a verifier on a labelled JSONL file")
    p.add_argument(
        "file", type=Path, help="JSONL rows: context, query, response, label_hallucinated (0 or 1)"
    )
    p.add_argument("--verifier", default="default", help="verifier model name (default: 'default')")
    p.add_argument(
        "--mode",
        choices=["context", "index"],
        default="context",
        help="evidence: each row's own context, or an index built from all rows' contexts",
    )
    p.add_argument("--limit", type=_positive, default=None, help="score N rows drawn with --seed")
    p.add_argument(
        "--decision",
        choices=["every_claim", "learned"],
        default="every_claim",
        help="the answer-level decision (policy verifier.decision)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the --limit sample")
    p.add_argument("--json", action="store_true", help="print the metrics object last")
    p.add_argument(
        "--out", type=Path, default=None, help="write rows.jsonl, roc.png, reliability.png here"
    )

    p = sub.add_parser("demo", help="sample tenant + documents + scripted upstream, end to end")
    p.add_argument(
        "--port",
        type=int,
        default=0,
        help="proxy port (default: a free one); with --upstream-only, the upstream's "
        "(default: the port of policies/demo.yaml's upstream.api_base, 8099)",
    )
    p.add_argument(
        "--upstream-only",
        action="store_true",
        help="run only the demo's scripted upstream, in the foreground, for a "
        "`groundproxy serve --policies ./policies` of your own",
    )

    p = sub.add_parser(
        "calibrate",
        help="fit a tenant's thresholds with a coverage guarantee (split conformal), "
        "or its adapter (--fit)",
    )
    p.add_argument("file", type=Path, nargs="?", help="labelled rows (optional with --fit)")
    p.add_argument("--tenant", required=True, help="the tenant to calibrate")
    p.add_argument(
        "--fit",
        action="store_true",
        help="learn the tenant's answer-level adapter from reviewers' labels (POST "
        "/v1/groundproxy/feedback) and FILE's rows",
    )
    p.add_argument(
        "--no-token-features",
        action="store_true",
        help="with --fit: leave out the token alignment (costly when the evidence comes from "
        "an index: its sentences are embedded again)",
    )
    p.add_argument(
        "--accept-warnings",
        action="store_true",
        help="with --fit: ship the fit even when warnings about its labels fire (else it is "
        "refused: exit 2, nothing written)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="accept a truly supported answer with probability at least 1 - ALPHA "
        "(default 0.1; not with --fit)",
    )
    p.add_argument("--verifier", default=None, help="default: the tenant's policy, else 'default'")
    _add_folders(p, "data", "policies")
    p.add_argument("--seed", type=int, default=0, help="random seed of the shuffle and split")
    p.add_argument(
        "--cal-fraction",
        type=float,
        default=0.5,
        help="share of the rows that calibrate (the rest are held out to measure it)",
    )
    p.add_argument("--limit", type=_positive, default=None, help="use N rows drawn with --seed")
    p.add_argument("--json", action="store_true", help="print the calibration object last")

    p = sub.add_parser("models", help="build and list verifier models (ONNX, int8)")
    msub = p.add_subparsers(dest="models_command", required=True)
    m = msub.add_parser("build", help="export a Hugging Face NLI model or causal LM to ONNX")
    m.add_argument(
        "--from",
        dest="source",
        required=True,
        help="local folder, .gguf file, or a hub id already in the local HF cache",
    )
    m.add_argument("--name", required=True, help="the name a policy uses (verifier.model)")
    m.add_argument(
        "--kind",
        choices=["auto", "nli", "causal-lm"],
        default="auto",
        help="what the model is (auto: detected from its config)",
    )
    m.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="tokens per pair (default 128 for nli, 256 for causal-lm)",
    )
    m.add_argument(
        "--pair-order",
        choices=["auto", "evidence-claim", "claim-evidence"],
        default="auto",
        help="nli input order (auto: claim first for a cross-encoder trained by groundproxy, "
        "which ships a ce_manifest.json; evidence first otherwise)",
    )
    m.add_argument("--force", action="store_true", help="replace a model of the same name")
    _add_folders(m, "models-dir", "data")
    m = msub.add_parser("list", help="list the verifiers a policy can name")
    _add_folders(m, "models-dir", "data")

    p = sub.add_parser("hash-key", help="print the sha256 hash of an API key for a policy file")
    p.add_argument("key", help="the API key (its hash goes in the policy's keys)")
    return parser


def _run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.command == "serve":
        from groundproxy.proxy.cli.serve import serve

        return serve(settings)
    if args.command == "ingest":
        from groundproxy.proxy.cli.commands import ingest

        return ingest(args, settings)
    if args.command == "delete":
        from groundproxy.proxy.cli.commands import delete
        from groundproxy.proxy.cli.serve import existing_data
        from groundproxy.retrieval.names import validate_tenant

        validate_tenant(args.tenant)
        existing_data(settings, "there is nothing to delete")

        return delete(settings.data, args.tenant, args.doc_ids, settings.database_url)
    if args.command == "check":
        from groundproxy.proxy.cli.commands import check

        return check(args, settings)
    if args.command == "eval":
        from groundproxy.proxy.cli.evaluate import run_eval_command

        return run_eval_command(args)
    if args.command == "demo":
        # The demo drives the public test doubles (groundproxy.testing, which imports proxy/):
        # run it as its own process rather than import it, so proxy/ never imports testing/.
        demo = [sys.executable, "-m", "groundproxy.testing.demo", "--port", str(args.port)]
        if args.upstream_only:  # a server: this process becomes it, so a signal reaches it
            os.execv(sys.executable, [*demo, "--upstream-only"])
        return subprocess.call(demo)
    if args.command == "calibrate" and args.fit:
        from groundproxy.proxy.cli.adapt_command import run_fit_command

        return run_fit_command(args, settings)
    if args.command == "calibrate":
        from groundproxy.proxy.cli.calibrate import run_calibrate_command

        return run_calibrate_command(args, settings)
    if args.command == "models":
        from groundproxy.proxy.cli.commands import models_build, models_list

        if args.models_command == "build":
            return models_build(args, settings)
        return models_list(settings.models_dir, settings.data)
    if args.command == "hash-key":
        from groundproxy.policies.keys import hash_key

        if not args.key.strip():
            raise BadRequestError("the key is empty: give the key to hash")
        print(hash_key(args.key))
        return 0
    raise AssertionError(args.command)


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The parser of the (sub-)command ``args`` ran: its usage errors name it
    (``groundproxy ingest: error: …``, not ``groundproxy: error: …``)."""
    found: Any = parser
    for dest in ("command", "models_command"):
        subs = [a for a in found._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, dest, None)
        if not subs or name not in subs[0].choices:
            break
        found = subs[0].choices[name]
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command != "serve":
        from groundproxy.proxy.logs import configure_cli_logging

        # one human line per warning on stderr (stdout carries the command's output)
        configure_cli_logging(f"groundproxy {args.command}")
    sys.exit(_run_reporting(args))


def _run_reporting(args: argparse.Namespace) -> int:
    """Run the command; a failure is one line on stderr (and the traceback with --debug)."""
    name = f"groundproxy {args.command}"
    try:
        return _run(args)
    except KeyboardInterrupt:
        return 130
    except GroundproxyError as exc:  # bad input, said by the code that found it
        _report(args, f"{name}: error: {exc.message}")
        return 2
    except OSError as exc:  # a file or folder the command was pointed at
        where = f" ({exc.filename})" if exc.filename else ""
        _report(args, f"{name}: error: {exc.strerror or exc}{where}")
        return 2
    except Exception as exc:  # a bug: still one line, the traceback with --debug
        detail = str(exc).splitlines()[0] if str(exc) else ""
        hint = "" if args.debug else " (--debug shows the traceback)"
        _report(args, f"{name}: internal error: {type(exc).__name__}: {detail}{hint}")
        return 1


def _report(args: argparse.Namespace, line: str) -> None:
    if args.debug:
        traceback.print_exc()
    print(line, file=sys.stderr)
