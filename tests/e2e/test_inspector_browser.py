"""The verdict inspector in real headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
driven by selenium) against a real ``groundproxy serve`` process and a scripted upstream.

Checked: the page loads and works with no console error; a contradicted claim is highlighted
in the original and its correction in the returned text; its citation opens the quoted
passage; a three-step pipeline's DAG marks the error step the trace API names; a normal
(non-admin) key gets 403. Screenshots go to ``$GROUNDPROXY_ARTIFACTS`` (else a temporary
folder). Chromium missing is a failure, not a skip: ``make browser-deps`` installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.conftest import SAMPLES, UPSTREAM_SCRIPT
from tests.traces_pipeline import DOCS, SCRIPT, step_messages

pytestmark = pytest.mark.slow

CHROMIUM = Path(os.environ.get("GROUNDPROXY_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("GROUNDPROXY_CHROMEDRIVER", "/usr/bin/chromedriver"))
KEY, ADMIN = "sk-insp-test-key", "sk-insp-admin-key"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
]
WAIT_S = 60


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = os.environ.get("GROUNDPROXY_ARTIFACTS")
    path = Path(out) / "inspector" if out else tmp_path_factory.mktemp("inspector-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    """A real proxy with one tenant: the sample documents and the pipeline's reports; a
    wrong warranty answer (request id req-warranty) and a three-step pipeline recorded."""
    from groundproxy.retrieval.ingest import ingest_texts

    root = tmp_path_factory.mktemp("inspector-e2e")
    up_port, port = free_port(), free_port()
    script = root / "script.json"
    rules = [*UPSTREAM_SCRIPT["rules"], *SCRIPT["rules"]]
    script.write_text(json.dumps({"default": "I do not know.", "rules": rules}), encoding="utf-8")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    spec = {
        "tenant": "insp",
        "keys": [hash_key(KEY)],
        "admin_keys": [hash_key(ADMIN)],
        "upstream": {
            "model": "openai/gpt-4o-mini",
            "api_base": f"http://127.0.0.1:{up_port}/v1",
            "api_key_env": "TEST_UPSTREAM_KEY",
            "timeout_s": 10,
        },
        "latency_budget_ms": 20000,
    }
    (policies / "insp.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    samples = [
        (p.name, p.read_text(encoding="utf-8"))
        for p in (SAMPLES / "handbook.md", SAMPLES / "products.md")
    ]
    ingest_texts(data, "insp", [*samples, *DOCS], embedder)
    upstream: subprocess.Popen[bytes] = start_fake_upstream(up_port, script)
    try:
        docs_on = {"GROUNDPROXY_API_DOCS": "1"}  # /docs, served offline (test_api_docs_*)
        proxy = start_proxy(port, policies, data, env=docs_on, log_path=root / "proxy.log")
        try:
            url = f"http://127.0.0.1:{port}"
            yield {"url": url, **_record_answers(url)}
        finally:
            stop_process(proxy)
    finally:
        stop_process(upstream)
    log = (root / "proxy.log").read_text(encoding="utf-8", errors="replace")
    assert KEY not in log and ADMIN not in log and "45 million" not in log  # no bodies, no keys


def _record_answers(url: str) -> dict[str, Any]:
    def chat(messages: list[dict[str, str]], headers: dict[str, str]) -> httpx.Response:
        resp = httpx.post(
            f"{url}/v1/chat/completions",
            timeout=60,
            headers={"authorization": f"Bearer {KEY}", **headers},
            json={"model": "gpt-4o-mini", "messages": messages},
        )
        assert resp.status_code == 200, resp.text
        return resp

    warranty = chat(
        [{"role": "user", "content": "How long is the warranty?"}], {"x-request-id": "req-warranty"}
    )
    trace = {"x-groundproxy-trace-id": "pipeline-1"}
    r1 = chat(step_messages(1), trace)
    r2 = chat(step_messages(2), trace)
    outs = [r.json()["choices"][0]["message"]["content"] for r in (r1, r2)]
    steps = [r.headers["x-groundproxy-step-id"] for r in (r1, r2)]
    r3 = chat(step_messages(3, outs), {**trace, "x-groundproxy-parent-ids": ",".join(steps)})
    dag = httpx.get(
        f"{url}/v1/groundproxy/traces/pipeline-1",
        timeout=60,
        headers={"authorization": f"Bearer {ADMIN}"},
    ).json()
    return {
        "warranty_step": warranty.headers["x-groundproxy-step-id"],
        "pipeline": [*steps, r3.headers["x-groundproxy-step-id"]],
        "error_steps": sorted({u["error_step"] for u in dag["unsupported"]}),
    }


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail(
            f"{CHROMIUM} or {CHROMEDRIVER} missing: run `make browser-deps` "
            "(apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="gp-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S).until(condition)


def _visible(css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return ec.visibility_of_element_located((By.CSS_SELECTOR, css))


def _console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _shot(driver: Any, path: Path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(1000, min(int(height) + 40, 4000)))
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    assert path.stat().st_size > 10_000


def _use_key(driver: Any, key: str) -> None:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.ID, "key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()


def _search(driver: Any, query: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()


def test_inspector_in_chromium(browser: Any, served: dict[str, Any], artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    driver, url = browser, served["url"]
    driver.get(f"{url}/ui")
    assert "enter an admin key" in driver.find_element(By.ID, "status").text
    _use_key(driver, ADMIN)
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#answers tbody tr")) >= 4)
    first = driver.find_element(By.CSS_SELECTOR, "#answers tbody tr")
    assert first.get_attribute("data-step") == served["pipeline"][-1]  # newest first
    assert "gpt-4o-mini" in first.text
    _shot(driver, artifacts / "01-recent-answers.png")

    # Search by request id: the one answer opens; the wrong claim is highlighted.
    _search(driver, "req-warranty")
    _wait(driver, _visible("#original mark.v-contradicted"))
    bad = driver.find_element(By.CSS_SELECTOR, "#original mark.v-contradicted")
    assert "24 months" in bad.text and "changed" in (bad.get_attribute("class") or "")
    fixed = driver.find_element(By.CSS_SELECTOR, "#returned mark.corrected")
    assert "12 months" in fixed.text
    assert "24 months" not in driver.find_element(By.ID, "returned").text
    item = driver.find_element(By.CSS_SELECTOR, "#claims li .badge.v-contradicted")
    claim = item.find_element(By.XPATH, "..")
    assert "P(contradicted)" in claim.text
    claim.find_element(By.CSS_SELECTOR, "button.cite").click()
    _wait(driver, _visible("#passage blockquote"))
    passage = driver.find_element(By.ID, "p-text").text
    assert "12 months" in passage, passage
    assert "handbook.md" in driver.find_element(By.ID, "p-source").text
    _shot(driver, artifacts / "02-contradicted-claim-and-passage.png")

    # Search by trace id: the pipeline's three steps; the DAG marks the error step(s).
    _search(driver, "pipeline-1")
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#answers tbody tr")) == 3)
    driver.find_element(
        By.CSS_SELECTOR, f'#answers tr[data-step="{served["pipeline"][1]}"]'
    ).click()
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#dag g.node")) == 3)
    marked = sorted(
        g.get_attribute("data-step")
        for g in driver.find_elements(By.CSS_SELECTOR, "#dag g.node.error-step")
    )
    assert served["error_steps"] and marked == served["error_steps"]
    assert "45 million" in driver.find_element(By.ID, "original").text
    assert "40 million" in driver.find_element(By.CSS_SELECTOR, "#returned mark.corrected").text
    driver.find_element(By.CSS_SELECTOR, 'button.cite[data-doc="reports/part-b.md"]').click()
    _wait(driver, lambda d: "reports/part-b.md" in d.find_element(By.ID, "p-source").text)
    assert "40 million" in driver.find_element(By.ID, "p-text").text
    _shot(driver, artifacts / "03-pipeline-trace.png")
    errors = _console_errors(driver)
    assert not errors, errors

    # A normal key of the tenant: 403, said on the page; nothing listed.
    driver.find_element(By.ID, "forget").click()
    _use_key(driver, KEY)
    _wait(driver, lambda d: "403" in d.find_element(By.ID, "status").text)
    assert "error" in (driver.find_element(By.ID, "status").get_attribute("class") or "")
    assert not driver.find_elements(By.CSS_SELECTOR, "#answers tbody tr")
    _shot(driver, artifacts / "04-normal-key-403.png")
    # The only console entry now is the browser's own note of the 403 response.
    errors = _console_errors(driver)
    assert errors and all("403" in e["message"] for e in errors), errors


HOSTILE_HASHES = (
    '#step="]x',  # threw in querySelector: the page stayed on "loading"
    "#step=st_0000000000000000'],body",
    "#step=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
    "#step=%E0%A4%A&q=%ZZ",
    "#step=" + "a" * 5000,
    "#q=%22%5D%20*&step=%00",
)


def test_inspector_survives_any_hash(browser: Any, served: dict[str, Any]) -> None:
    """Issue 32: whatever the URL's hash holds, the page lists the answers and says what it
    could not open; no script error, nothing left on "loading"; a real step still opens."""
    from selenium.webdriver.common.by import By

    driver, url = browser, served["url"]
    driver.get(f"{url}/ui")
    driver.find_element(By.ID, "forget").click()
    _use_key(driver, ADMIN)
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#answers tbody tr"))
    driver.get_log("browser")  # start clean
    for n, fragment in enumerate(HOSTILE_HASHES):
        driver.get(f"{url}/ui?visit={n}{fragment}")  # a new page load for each hash
        _wait(driver, lambda d: d.find_element(By.ID, "status").text.strip())
        _wait(driver, lambda d: "loading" not in d.find_element(By.ID, "status").text)
        status = driver.find_element(By.ID, "status")
        if "step=" in fragment:
            assert "not a step id" in status.text, (fragment, status.text)
            assert "error" in (status.get_attribute("class") or "")
        assert driver.find_element(By.ID, "detail").get_attribute("hidden") is not None
        errors = _console_errors(driver)
        assert not errors, (fragment, errors)
    driver.get(f"{url}/ui?visit=ok#step={served['warranty_step']}")
    _wait(driver, _visible("#original mark.v-contradicted"))
    assert served["warranty_step"] in driver.find_element(By.ID, "d-step").text


def test_api_docs_are_served_offline(browser: Any, served: dict[str, Any]) -> None:
    """Issue 32: with GROUNDPROXY_API_DOCS on, /docs is Swagger UI from this server alone
    (every resource the page loads is same-origin; no CSP violation, no console error) and
    lists the API's operations."""
    from selenium.webdriver.common.by import By

    driver, url = browser, served["url"]
    driver.get_log("browser")  # start clean
    driver.get(f"{url}/docs")
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) >= 5)
    paths = {
        e.get_attribute("data-path")
        for e in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    }
    assert "/v1/chat/completions" in paths, paths
    loaded = driver.execute_script(
        "return performance.getEntriesByType('resource').map((e) => e.name)"
    )
    assert loaded and all(str(u).startswith(url + "/") for u in loaded), loaded
    errors = _console_errors(driver)
    assert not errors, errors
