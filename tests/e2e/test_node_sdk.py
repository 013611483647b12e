"""End to end with the official ``openai`` **Node** SDK (npm, pinned in tests/node): the real
``groundproxy serve`` process and the fake upstream process, driven by ``tests/node/sdk.test.mjs``
(``node:test``) exactly as a Node application would use them: guarded chat with the
``x-groundproxy-*`` headers, streamed text, tool calls (streamed and not, guard on and off,
buffer / sentence / relay), JSON mode and ``json_schema`` through ``.parse()``, the Responses
API, completions, embeddings, logprobs, ``include_usage``, and errors with their SDK classes.

The tenants and the upstream script are the Python SDK tests' (test_openai_sdk_tools.py,
test_endpoints_sdk.py). Node and the npm packages are installed by ``make node-deps``; without
them this test fails, never skips."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.test_openai_shapes import RULES, WEATHER_ARGS
from tests.conftest import KEYS, UPSTREAM_SCRIPT
from tests.e2e.test_endpoints_sdk import MODELS
from tests.e2e.three_tenants import three_tenant_server

pytestmark = pytest.mark.slow
NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "sdk.test.mjs"
# The number of node:test subtests in sdk.test.mjs: all must run and pass.
EXPECTED_PASSED = 24
TENANTS = ("acme", "sentence", "loose")  # buffer, sentence, guard off (relay when streamed)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[str]:
    with three_tenant_server(
        tmp_path_factory.mktemp("node-sdk"),
        data_dir,
        [*RULES, *UPSTREAM_SCRIPT["rules"]],
        upstream={"models": dict(MODELS)},
    ) as url:
        yield url


def _tap_count(output: str, what: str) -> int:
    found = re.search(rf"^# {what} (\d+)$", output, re.MULTILINE)
    assert found, f"no '# {what}' line in node's TAP output:\n{output[-4000:]}"
    return int(found.group(1))


def test_openai_node_sdk(base_url: str) -> None:
    node = shutil.which("node")
    assert node, "node is not installed: run `make node-deps`"
    installed = NODE_DIR / "node_modules" / "openai" / "package.json"
    assert installed.is_file(), "tests/node/node_modules is missing: run `make node-deps`"
    pinned = json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8"))
    version = json.loads(installed.read_text(encoding="utf-8"))["version"]
    assert version == pinned["dependencies"]["openai"], "stale node_modules: `make node-deps`"
    env = {
        **os.environ,
        "GP_BASE_URL": base_url,
        "GP_KEYS": json.dumps({t: KEYS[t] for t in TENANTS}),
        "GP_WEATHER_ARGS": WEATHER_ARGS,
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [node, "--test", "--test-reporter=tap", str(SCRIPT)],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert _tap_count(output, "fail") == 0, output[-6000:]
    assert _tap_count(output, "pass") == EXPECTED_PASSED, output[-6000:]
