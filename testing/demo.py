"""``groundproxy demo``: the whole product, end to end, on bundled sample documents (run
as ``python -m groundproxy.testing.demo``; it drives the public test doubles).

1. a scripted OpenAI-compatible upstream starts as a real HTTP server process
   (unless ``OPENAI_API_KEY`` is set: then the real OpenAI API answers);
2. the sample documents are ingested into tenant ``demo``;
3. ``groundproxy serve`` starts as a real process;
4. three requests go through the official ``openai`` SDK; the claims, verdicts,
   citations and headers are printed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process

SAMPLES = Path(__file__).resolve().parent / "samples"
DEMO_POLICY = Path(__file__).resolve().parent.parent / "policies" / "demo.yaml"
DEMO_KEY = "gp-demo-key-please-change"
QUESTIONS = [
    ("How long is the warranty on the Acme vacuum robot?", False),
    ("Can I return my robot, and how are refunds handled?", True),
    ("Tell me about the Acme R2: battery, weight and where maps are stored.", False),
]


def _write_policy(policies: Path, upstream_port: int | None) -> None:
    policy: dict[str, Any] = yaml.safe_load(DEMO_POLICY.read_text(encoding="utf-8"))
    if upstream_port is None:
        policy["upstream"] = {
            "model": "openai/gpt-4o-mini",
            "models": {"demo-model": "openai/gpt-4o-mini"},
            "api_key_env": "OPENAI_API_KEY",
        }
    else:
        policy["upstream"]["api_base"] = f"http://127.0.0.1:{upstream_port}/v1"
    (policies / "demo.yaml").write_text(yaml.safe_dump(policy, sort_keys=False), "utf-8")


def _print_result(question: str, content: str, headers: dict[str, str], gp: dict[str, Any]) -> None:
    width = shutil.get_terminal_size((100, 20)).columns
    print("=" * min(width, 100))
    print(f"Q: {question}")
    print("-" * min(width, 100))
    print("Answer returned to the client:")
    print(textwrap.indent(content.strip(), "  "))
    print("\nClaims:")
    print(f"  {'verdict':<13}{'p(sup)':>7}  {'claim':<52} citation")
    for c in gp.get("claims", []):
        cite = c["citations"][0] if c.get("citations") else None
        where = f"{cite['doc']}#{cite['chunk']}" if cite else "-"
        text = c["text"] if len(c["text"]) <= 50 else c["text"][:49] + "…"
        print(f"  {c['verdict']:<13}{c['probs']['supported']:>7.2f}  {text:<52} {where}")
        if c.get("correction"):
            print(f"  {'':<22}→ corrected: {c['correction']}")
        print(f"  {'':<22}  {c.get('explanation', '')}")
    print("\nHeaders:")
    for k in sorted(headers):
        if k.startswith("x-groundproxy-") or k == "x-request-id":
            print(f"  {k}: {headers[k]}")


def _ask(base_url: str, question: str, stream: bool) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=DEMO_KEY, max_retries=0, timeout=120)
    messages: list[Any] = [
        {"role": "system", "content": "You are Acme Robotics' support assistant."},
        {"role": "user", "content": question},
    ]
    if not stream:
        raw = client.chat.completions.with_raw_response.create(
            model="demo-model", messages=messages
        )
        completion = raw.parse()
        gp = (completion.model_extra or {}).get("groundproxy", {})
        _print_result(question, completion.choices[0].message.content or "", dict(raw.headers), gp)
        return
    with client.chat.completions.with_streaming_response.create(
        model="demo-model", messages=messages, stream=True
    ) as response:
        parts: list[str] = []
        gp = {}
        for chunk in response.parse():
            for choice in chunk.choices:
                if choice.delta.content:
                    parts.append(choice.delta.content)
            extra = chunk.model_extra or {}
            if "groundproxy" in extra:
                gp = extra["groundproxy"]
        _print_result(question + "  (streamed)", "".join(parts), dict(response.headers), gp)


def run_demo(port: int = 0) -> int:
    from groundproxy.retrieval.embedder import load_embedder
    from groundproxy.retrieval.ingest import ingest_paths

    work = Path(tempfile.mkdtemp(prefix="groundproxy-demo-"))
    policies, data = work / "policies", work / "data"
    policies.mkdir()
    procs = []
    try:
        use_openai = bool(os.environ.get("OPENAI_API_KEY"))
        upstream_port = None
        if not use_openai:
            upstream_port = free_port()
            print(f"starting the scripted upstream on 127.0.0.1:{upstream_port} …")
            procs.append(start_fake_upstream(upstream_port, SAMPLES / "demo_script.json"))
        else:
            print("OPENAI_API_KEY is set: the real OpenAI API answers (gpt-4o-mini)")
        _write_policy(policies, upstream_port)
        print("ingesting the sample documents into tenant 'demo' …")
        docs = [SAMPLES / n for n in ("handbook.md", "products.md", "privacy.html")]
        result = ingest_paths(data, "demo", docs, load_embedder(), progress=False)
        print(
            f"  {result.added} documents, {result.chunks_added} chunks, "
            f"index version {result.version}"
        )
        port = port or free_port()
        print(f"starting groundproxy serve on 127.0.0.1:{port} …")
        procs.append(start_proxy(port, policies, data, log_path=work / "proxy.log"))
        base_url = f"http://127.0.0.1:{port}/v1"
        print(f"OPENAI_BASE_URL={base_url}\n")
        for question, stream in QUESTIONS:
            _ask(base_url, question, stream)
        print("=" * 100)
        return 0
    finally:
        for proc in reversed(procs):
            stop_process(proc)
        shutil.rmtree(work, ignore_errors=True)


def demo_upstream_port() -> int:
    """The port of the demo policy's ``upstream.api_base`` (what ``--upstream-only`` serves)."""
    policy: dict[str, Any] = yaml.safe_load(DEMO_POLICY.read_text(encoding="utf-8"))
    port = urlsplit(str(policy["upstream"]["api_base"])).port
    assert port is not None, "policies/demo.yaml: upstream.api_base names no port"
    return port


def run_upstream_only(port: int) -> int:
    """The demo's scripted upstream alone, in the foreground until interrupted: what
    ``policies/demo.yaml`` points at, for a ``groundproxy serve`` of your own."""
    from groundproxy.testing.fake_upstream import main as upstream

    port = port or demo_upstream_port()
    print(
        f"demo upstream on http://127.0.0.1:{port}/v1 (scripted answers; Ctrl-C stops it)",
        flush=True,
    )
    upstream(["--port", str(port), "--script", str(SAMPLES / "demo_script.json")])
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m groundproxy.testing.demo [--port N] [--upstream-only]`` (what
    ``groundproxy demo`` runs)."""
    import argparse

    parser = argparse.ArgumentParser(prog="groundproxy demo", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="proxy port (default: a free one)")
    parser.add_argument("--upstream-only", action="store_true")
    args = parser.parse_args(argv)
    if args.upstream_only:
        return run_upstream_only(args.port)
    return run_demo(args.port)


if __name__ == "__main__":
    raise SystemExit(main())
