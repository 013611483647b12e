"""Issue 29, labels that always help, through the real server and the real CLI.

- Inverted labels (right answers marked hallucinated, wrong values marked fine): the fit
  warns twice (the zero-shot decision below chance on them; answers a value rule
  contradicts labelled correct) and refuses to ship (exit 2, nothing written; issue 40
  item 3); told ``--accept-warnings``, the adapter it ships — which accepts the wrong answer
  — never switches the rule's correction off: the wrong value is still corrected.
- Labels the zero-shot decision already gets right: no adapter can beat it, so the fit
  keeps the zero-shot decision (a zero-shot record; an adapter in force before is
  withdrawn) and says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from groundproxy.proxy.storage.adapters import write_adapter
from tests.conftest import ACCEPT_ALL, ADMIN_KEYS, KEYS, _policy
from tests.e2e.adapter_serving import fit_adapter, run_fit, serving

pytestmark = pytest.mark.slow

CONTEXT = "The team meeting is on Tuesday at 10:00 in room {n}."
RIGHT = "The meeting is on Tuesday at 10:00 in room {n}."
WRONG = "The meeting is on Tuesday at 15:00 in room {n}."
QUESTION = "When is the meeting?"
LABELS = 12  # of each kind


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Iterator[Any]:
    specs = {t: _policy(t, upstream_port) for t in ("acme", "globex")}
    with serving(tmp_path_factory.mktemp("adapter-safety"), specs) as found:
        yield found


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _check(c: httpx.Client, tenant: str, answer: str, n: int) -> dict[str, Any]:
    body = {"answer": answer.format(n=n), "question": QUESTION, "context": [CONTEXT.format(n=n)]}
    resp = c.post("/v1/groundproxy/check", json=body, headers=_auth(KEYS[tenant]))
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def _label(c: httpx.Client, tenant: str, answer: str, n: int, label: str) -> None:
    body: dict[str, Any] = {"answer": answer.format(n=n), "question": QUESTION, "label": label}
    body["context"] = [CONTEXT.format(n=n)]
    resp = c.post("/v1/groundproxy/feedback", json=body, headers=_auth(ADMIN_KEYS[tenant]))
    assert resp.status_code == 200, resp.text


def test_inverted_labels_warn_and_never_switch_a_correction_off(server: Any) -> None:
    url, policies, data = server
    with httpx.Client(base_url=url, timeout=120) as c:
        zero = _check(c, "acme", WRONG, 99)
        assert zero["action"] == "rewrite" and "10:00" in zero["answer"]
        for n in range(LABELS):
            _label(c, "acme", RIGHT, n, "hallucinated")
            _label(c, "acme", WRONG, n, "supported")
        refused = run_fit("acme", data, policies)
        assert refused.returncode == 2 and "refused: 2 warning(s)" in refused.stderr
        assert "--accept-warnings" in refused.stderr and not list((data / "acme").glob("adapter*"))
        content, stderr = fit_adapter("acme", data, policies, "--accept-warnings")
        assert "warning: the labels disagree with the zero-shot decision" in stderr
        assert f"{LABELS} of {LABELS} answers whose values the evidence contradicts" in stderr
        assert content.get("decision") != "zero_shot"  # it does fit these labels (inverted)
        served = _check(c, "acme", WRONG, 77)
    adapter = served["groundproxy"]["adapter"]
    assert adapter["source"] == "tenant" and adapter["decision"] == "accept"
    # the adapter accepts the answer, the value rule's correction stands
    (claim,) = served["groundproxy"]["claims"]
    assert claim["verdict"] == "contradicted" and claim["action"] == "corrected"
    assert served["action"] == "rewrite" and "15:00" not in served["answer"]
    assert served["answer"].startswith("The meeting is on Tuesday at 10:00 in room 77")


def test_a_fit_that_cannot_beat_zero_shot_keeps_it(server: Any) -> None:
    url, policies, data = server
    # an adapter in force before (accepts everything): the new fit must withdraw it
    write_adapter(data, "globex", ACCEPT_ALL)
    write_adapter(data, "globex", ACCEPT_ALL)
    with httpx.Client(base_url=url, timeout=120) as c:
        assert _check(c, "globex", RIGHT, 1)["groundproxy"]["adapter"]["version"] == 2
        for n in range(LABELS):
            _label(c, "globex", RIGHT, n, "supported")
            _label(c, "globex", WRONG, n, "hallucinated")
        content, stderr = fit_adapter("globex", data, policies)
        fit = content["fit"]
        assert content["decision"] == "zero_shot" and content["version"] == 3
        assert fit["zero_shot_balanced_accuracy"] == 1.0
        assert fit["cross_fitted_balanced_accuracy"] <= 1.0 and "warning" not in stderr
        assert (data / "globex" / "adapter-v3.json").is_file()
        right, wrong = _check(c, "globex", RIGHT, 50), _check(c, "globex", WRONG, 50)
    assert "adapter" not in right["groundproxy"] and "adapter" not in wrong["groundproxy"]
    assert right["action"] == "none" and wrong["action"] == "rewrite"
