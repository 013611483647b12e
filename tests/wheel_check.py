"""The shipped artefact, checked as a new user meets it (``make wheel-check``, part of
``make test``):

1. build the wheel from the Docker build context (this checkout less ``.dockerignore``:
   what the Dockerfile's builder stage builds from);
2. install it with its locked dependencies into a NEW venv in a temporary folder outside the
   repository (pip's cache and the local torch wheel make that take minutes, not tens);
3. from a folder with no source in it, run the Dockerfile's exact ``ENTRYPOINT`` + ``CMD`` with
   its ``ENV`` (paths moved into the temporary folder, the port made free): ``groundproxy
   ingest`` one document, then ``groundproxy serve``, with the wheel's own scripted upstream
   (``python -m groundproxy.testing.fake_upstream``);
4. send one guarded request through the official ``openai`` SDK installed in that venv and
   check that the wrong number came back corrected and cited;
5. run ``groundproxy demo`` (``docker run … demo``) from the wheel.

Exit status 0 on success; any failure prints what went wrong and the server's log.
Run: ``python tests/wheel_check.py [--keep] [--find-links DIR]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-wheel-client"
DOC = "Acme R2 specification. The Acme R2 robot weighs 3.4 kilograms. Its battery holds 5,200 mAh."
WRONG = "The Acme R2 robot weighs 4.1 kilograms."
CLIENT = """
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
raw = client.chat.completions.with_raw_response.create(
    model="wheel-model", messages=[{"role": "user", "content": "How heavy is the R2?"}])
done = raw.parse()
print(json.dumps({"headers": dict(raw.headers), "content": done.choices[0].message.content}))
"""


def dockerfile_runtime() -> tuple[dict[str, str], list[str], list[str]]:
    """ENV, ENTRYPOINT and CMD of the Dockerfile's last stage."""
    lines = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ").splitlines()
    stages: list[list[str]] = []
    for line in lines:
        if line.startswith("FROM "):
            stages.append([])
        elif stages:
            stages[-1].append(line)
    env: dict[str, str] = {}
    entry: list[str] = []
    cmd: list[str] = []
    for line in stages[-1]:
        word, _, rest = line.partition(" ")
        if word == "ENV":
            for item in rest.split():
                name, _, value = item.partition("=")
                env[name] = value
        elif word == "ENTRYPOINT":
            entry = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    if not entry or not cmd:
        raise SystemExit("Dockerfile: the runtime stage needs an exec-form ENTRYPOINT and CMD")
    return env, entry, cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(args: list[str], **kw: object) -> None:
    print("+", " ".join(args), flush=True)
    subprocess.run(args, check=True, **kw)  # type: ignore[call-overload]


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready after {timeout_s:.0f} s")


def docker_context(dest: Path) -> Path:
    """A copy of what ``docker build .`` sends (``.dockerignore`` applied): the wheel is built
    from it, as in the image, so a file the image needs and the context lacks fails here."""
    sys.path.insert(0, str(REPO))
    from tests.dockerignore import build_context

    for rel in build_context(REPO):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel)
    return dest


def run_demo(command: list[str], work: Path, env: dict[str, str]) -> None:
    """``docker run … demo``: the demo from the wheel, its scripted upstream (no OpenAI key)."""
    demo_env = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    print("+", " ".join(command), flush=True)
    done = subprocess.run(
        command, cwd=work, env=demo_env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0 or "corrected:" not in done.stdout:
        raise RuntimeError(f"groundproxy demo failed ({done.returncode}): {done.stderr[-3000:]}")
    print(f"demo: {done.stdout.count('Q: ')} questions answered, a claim corrected", flush=True)


def policy(port_upstream: int) -> str:
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    return (
        "tenant: wheel\n"
        f'keys: ["sha256:{digest}"]\n'
        "upstream:\n"
        "  model: openai/wheel-model\n"
        f"  api_base: http://127.0.0.1:{port_upstream}/v1\n"
        "  api_key_env: WHEEL_UPSTREAM_KEY\n"
        "stream: buffer\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--venv", type=Path, help="reuse this venv (default: a new one)")
    local = "/opt/wheels" if Path("/opt/wheels").is_dir() else ""
    parser.add_argument("--find-links", default=local, help="a folder of wheels (local torch)")
    opts = parser.parse_args()
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="groundproxy-wheel-"))
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp / "serve.log"
    try:
        dist = tmp / "dist"
        context = docker_context(tmp / "context")
        pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"]
        run([*pip_wheel, "--no-build-isolation", "-w", str(dist), str(context)])
        wheel = next(dist.glob("groundproxy-*.whl"))
        venv = opts.venv or tmp / "venv"
        if not opts.venv:
            run([sys.executable, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        links = (
            ["--find-links", opts.find_links]
            if opts.find_links
            else ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]
        )
        run([*pip, "--force-reinstall", "--no-deps", str(wheel)])
        run([*pip, *links, "-c", str(REPO / "requirements.lock"), str(wheel)])
        installed = time.monotonic()
        print(f"wheel built and installed in {installed - started:.0f} s", flush=True)

        env_file, entry, cmd = dockerfile_runtime()
        work = tmp / "run"  # no source here: imports can only come from the wheel
        (work / "policies").mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(env_file)
        env.update(
            {
                "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}",
                "GROUNDPROXY_POLICIES": str(work / "policies"),
                "GROUNDPROXY_DATA": str(work / "data"),
                "GROUNDPROXY_CACHE": str(work / "cache"),
                "WHEEL_UPSTREAM_KEY": "sk-upstream-wheel",
            }
        )
        script = work / "script.json"
        script.write_text(json.dumps({"default": WRONG, "rules": []}), encoding="utf-8")
        up_port = free_port()
        upstream = subprocess.Popen(
            [
                str(venv / "bin" / "python"),
                "-m",
                "groundproxy.testing.fake_upstream",
                "--port",
                str(up_port),
                "--script",
                str(script),
            ],
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        procs.append(upstream)
        (work / "policies" / "wheel.yaml").write_text(policy(up_port), encoding="utf-8")
        (work / "spec.md").write_text(DOC, encoding="utf-8")
        run([*entry, "ingest", "--tenant", "wheel", str(work / "spec.md")], cwd=work, env=env)

        port = free_port()  # the image's port (ENV GROUNDPROXY_PORT, or a CMD --port) made free
        env.update({k: str(port) for k, v in env_file.items() if k == "GROUNDPROXY_PORT"})
        serve_cmd = [*entry, *[str(port) if a == "8080" else a for a in cmd]]
        print("+", " ".join(serve_cmd), flush=True)
        with log.open("wb") as out:
            proxy = subprocess.Popen(
                serve_cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        procs.append(proxy)
        wait_ready(f"http://127.0.0.1:{up_port}/_stats", upstream, 60)
        wait_ready(f"http://127.0.0.1:{port}/readyz", proxy, 300)
        result = subprocess.run(
            [str(venv / "bin" / "python"), "-c", CLIENT, f"http://127.0.0.1:{port}/v1", KEY],
            cwd=work,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        answer = json.loads(result.stdout)
        headers, content = answer["headers"], answer["content"]
        print(
            f"action={headers.get('x-groundproxy-action')} trust="
            f"{headers.get('x-groundproxy-trust')} content={content!r}"
        )
        problems = []
        if headers.get("x-groundproxy-action") != "rewrite":
            problems.append("expected x-groundproxy-action: rewrite")
        if "3.4" not in content or "4.1" in content:
            problems.append("expected the weight corrected to 3.4")
        if "spec.md" not in headers.get("x-groundproxy-citations", ""):
            problems.append("expected spec.md cited")
        if problems:
            raise RuntimeError("; ".join(problems))
        run_demo([*entry, "demo"], work, env)
        print(
            f"wheel check passed in {time.monotonic() - started:.0f} s "
            f"(install {installed - started:.0f} s)"
        )
        return 0
    except (subprocess.CalledProcessError, RuntimeError, StopIteration) as exc:
        print(f"wheel check FAILED: {exc}", file=sys.stderr)
        if isinstance(exc, subprocess.CalledProcessError) and exc.stderr:
            print(exc.stderr, file=sys.stderr)
        if log.exists():
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
        return 1
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not opts.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
