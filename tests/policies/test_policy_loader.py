"""load_policy_file: valid files, defaults, and the error messages people see."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from groundproxy.errors import PolicyError
from groundproxy.policies.keys import (
    constant_time_equals,
    hash_key,
    is_key_hash,
    split_env_keys,
    verify_key,
)
from groundproxy.policies.loader import LoadedPolicy, load_policy_file
from groundproxy.policies.schema import (
    ActionsPolicy,
    Policy,
    RetrievalPolicy,
    RulesPolicy,
    UpstreamPolicy,
    VerifierPolicy,
)

DEMO = Path(__file__).resolve().parents[2] / "policies" / "demo.yaml"
RAW = "sk-acme-raw-key-123"

MINIMAL = f"""\
tenant: acme
keys: ["{hash_key(RAW)}"]
upstream:
  model: openai/gpt-4o-mini
"""


def write(tmp_path: Path, text: str, name: str = "acme.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    return info.value


def test_hash_key_and_helpers() -> None:
    h = hash_key("abc")
    assert h == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert is_key_hash(h) and not is_key_hash("abc") and not is_key_hash(h.upper())
    assert verify_key("abc", h) and not verify_key("abd", h)
    assert constant_time_equals("x", "x") and not constant_time_equals("x", "y")
    assert split_env_keys(" a, b ,,c ") == ["a", "b", "c"]


def test_minimal_file_loads_with_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    lp = load_policy_file(path)
    assert isinstance(lp, LoadedPolicy)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert lp.policy_id == f"acme@{digest[:7]}"
    assert lp.tenant == "acme" and lp.path == path
    assert lp.key_hashes == frozenset({hash_key(RAW)})
    assert lp.admin_key_hashes == frozenset()
    p = lp.policy
    assert p.retrieval == RetrievalPolicy() and p.verifier == VerifierPolicy()
    assert p.rules == RulesPolicy() and p.actions == ActionsPolicy()
    assert (p.retrieval.top_k, p.retrieval.min_score, p.verifier.threshold) == (3, 0.25, "model")
    assert (p.actions.contradicted, p.actions.unverifiable) == ("rewrite", "flag")
    assert (p.citations, p.on_guard_error, p.latency_budget_ms) == ("footnotes", "annotate", 800)
    assert p.index_name == "acme"


def test_demo_policy_documents_the_defaults() -> None:
    lp = load_policy_file(DEMO)
    assert lp.tenant == "demo"
    assert lp.key_hashes == {hash_key("gp-demo-key-please-change")}
    assert lp.admin_key_hashes == {hash_key("gp-demo-admin-please-change")}
    assert lp.policy.upstream == UpstreamPolicy(
        model="openai/demo-model",
        models={"demo-model": "openai/demo-model"},
        api_base="http://127.0.0.1:8099/v1",
        api_key_env="DEMO_UPSTREAM_KEY",
    )
    # Every other value is the schema default.
    set_here = {"tenant", "keys", "admin_keys", "upstream", "stream"}
    defaults = Policy(tenant="demo", keys=list(lp.key_hashes), upstream=lp.policy.upstream)
    for name in Policy.model_fields.keys() - set_here:
        assert getattr(lp.policy, name) == getattr(defaults, name), name
    assert lp.policy.stream == "sentence"
    text = DEMO.read_text(encoding="utf-8")
    for name in Policy.model_fields:
        assert f"\n{name}:" in text, f"demo.yaml should write out {name}"


def test_unknown_top_level_key_names_closest(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "retreival: {top_k: 3}\n")
    err = error_of(path)
    # file:line of the key, what is wrong, the hint
    assert err.message == f"{path}:5: unknown key 'retreival' — did you mean 'retrieval'?"
    assert err.param == "retreival"


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        (
            "retrieval:\n  top_kk: 3\n",
            "unknown key 'retrieval.top_kk' — did you mean 'retrieval.top_k'?",
        ),
        ("actions:\n  Contradicted: block\n", "did you mean 'actions.contradicted'?"),
        ("verifier:\n  decison: learned\n", "did you mean 'verifier.decision'?"),
        ("rules:\n  missing_suport: 0.5\n", "did you mean 'rules.missing_support'?"),
        (
            "verifier:\n  zzz: 1\n",
            "unknown key 'verifier.zzz' — valid keys under 'verifier': model,",
        ),
    ],
)
def test_unknown_nested_key_names_path_and_closest(
    tmp_path: Path, snippet: str, expected: str
) -> None:
    err = error_of(write(tmp_path, MINIMAL + snippet))
    assert err.message.startswith(f"{tmp_path / 'acme.yaml'}:6: ")  # the nested key's line
    assert expected in err.message


def test_unknown_key_inside_upstream(tmp_path: Path) -> None:
    text = MINIMAL.replace("  model: openai/gpt-4o-mini\n", "  model: m\n  modles: {a: b}\n")
    err = error_of(write(tmp_path, text))
    assert "unknown key 'upstream.modles' — did you mean 'upstream.models'?" in err.message


def test_wrong_type_names_the_path(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "retrieval:\n  top_k: many\n")
    err = error_of(path)
    assert err.message.startswith(f"{path}:6: retrieval.top_k: Input should be a valid integer")
    assert err.param == "retrieval.top_k"
    err = error_of(write(tmp_path, MINIMAL + "actions: {contradicted: explode}\n"))
    assert "actions.contradicted: Input should be 'annotate', 'flag', 'rewrite' or 'block'" in (
        err.message
    )


def test_threshold_error_is_one_clear_message(tmp_path: Path) -> None:
    for bad in ("often", "1.5", "yes"):
        err = error_of(write(tmp_path, MINIMAL + f"verifier: {{threshold: {bad}}}\n"))
        assert err.message.endswith(
            "verifier.threshold: threshold must be a number in [0, 1], 'model' or 'calibrated'"
        )
    ok = write(tmp_path, MINIMAL + "verifier: {threshold: calibrated}\n")
    assert load_policy_file(ok).policy.verifier.threshold == "calibrated"


def test_missing_required_field(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, f'tenant: acme\nkeys: ["{hash_key(RAW)}"]\n'))
    assert "upstream: Field required" in err.message


def test_stem_must_equal_tenant(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL, name="globex.yaml")
    err = error_of(path)
    assert str(path) in err.message
    assert "tenant 'acme' does not match the file name" in err.message


def test_raw_key_is_rejected_and_not_echoed(tmp_path: Path) -> None:
    text = MINIMAL.replace("keys: [", f'keys: ["{hash_key("x")}", "{RAW}", ')
    text = text.replace(f', "{hash_key(RAW)}"]', "]")
    err = error_of(write(tmp_path, text))
    assert "keys[1] is not a key hash" in err.message
    assert RAW not in err.message
    assert RAW not in str(err.__cause__ or "") and err.__suppress_context__


def test_yaml_errors_name_file_and_line_without_content(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + f'retrieval: {{top_k: 3\nsecret: "{RAW}"\n')
    err = error_of(path)
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: invalid YAML: ", err.message), err.message
    assert RAW not in err.message
    err = error_of(write(tmp_path, MINIMAL + "tenant: acme\n"))
    assert "duplicate key 'tenant'" in err.message and "acme.yaml:5:1:" in err.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the policy file is empty: a policy needs at least tenant, keys and upstream"),
        (
            "- a\n- b\n",
            "a policy file must be a YAML mapping (tenant: …, keys: …), but the document is a list",
        ),
    ],
)
def test_non_mapping_document(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    assert error_of(path).message == f"{path}:1: " + expected + (
        " (policies/demo.yaml documents every field)" if not text else ""
    )


def test_key_env_raw_keys_are_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_KEYS", " env-key-1 , env-key-2,, ")
    text = "tenant: acme\nkey_env: ACME_KEYS\nupstream: {model: m}\n"
    lp = load_policy_file(write(tmp_path, text))
    assert lp.key_hashes == {hash_key("env-key-1"), hash_key("env-key-2")}
    assert "env-key" not in repr(lp)
    # keys and key_env together: the union
    lp = load_policy_file(write(tmp_path, MINIMAL + "key_env: ACME_KEYS\n"))
    assert lp.key_hashes == {hash_key(RAW), hash_key("env-key-1"), hash_key("env-key-2")}


def test_key_env_unset_without_keys_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACME_KEYS", raising=False)
    err = error_of(write(tmp_path, "tenant: acme\nkey_env: ACME_KEYS\nupstream: {model: m}\n"))
    assert "ACME_KEYS is not set or empty" in err.message
    err = error_of(write(tmp_path, "tenant: acme\nupstream: {model: m}\n"))
    assert "a policy needs 'keys' (sha256 hashes) or 'key_env'" in err.message
