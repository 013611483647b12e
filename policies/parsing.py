"""Parse one policy file into a :class:`LoadedPolicy`, with errors people can act on.

Every failure is a :class:`~groundproxy.errors.PolicyError` whose message names the file,
the line (``file:line:``, as compilers do), the field path (``retrieval.top_k``) and, for an
unknown key, the closest valid key::

    policies/acme.yaml:19: unknown key 'retreival' — did you mean 'retrieval'?

Messages never echo a value from the file (a raw API key could be one).
``policies.loader`` re-exports the public names.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from groundproxy.errors import PolicyError
from groundproxy.policies.keys import hash_key, is_key_hash, split_env_keys
from groundproxy.policies.schema import Policy

log = structlog.get_logger(__name__)

POLICY_SUFFIXES = (".yaml", ".yml")
_MAX_NAME = 60  # longest unknown key / duplicate key echoed in a message


@dataclass(frozen=True, slots=True)
class LoadedPolicy:
    """A validated policy plus what the proxy needs at request time.

    ``key_hashes`` holds the ``keys`` of the file plus the hashes of the raw keys
    found in ``key_env`` at load time; raw keys are not kept.
    """

    policy: Policy
    policy_id: str  # "<tenant>@<first 7 hex of sha256(file bytes)>"
    path: Path
    key_hashes: frozenset[str]
    admin_key_hashes: frozenset[str]

    @property
    def tenant(self) -> str:
        return self.policy.tenant


def load_policy_file(path: Path) -> LoadedPolicy:
    """Read, validate and return the policy in ``path``; raise PolicyError if it is bad."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy file: {exc.strerror or exc}") from exc
    return parse_policy_bytes(Path(path), data)


def parse_policy_bytes(
    path: Path, data: bytes, *, environ: Mapping[str, str] | None = None
) -> LoadedPolicy:
    """Validate the policy file content ``data`` read from ``path``.

    ``environ`` (default ``os.environ``) supplies the ``key_env`` variable.
    """
    doc, text = _parse_yaml(path, data)
    if doc is None:
        raise PolicyError(
            f"{path}:1: the policy file is empty: a policy needs at least tenant, keys and "
            "upstream (policies/demo.yaml documents every field)"
        )
    if not isinstance(doc, dict):
        raise PolicyError(
            f"{path}:1: a policy file must be a YAML mapping (tenant: …, keys: …), "
            f"but the document is a {_yaml_kind(doc)}"
        )
    try:
        policy = Policy.model_validate(doc)
    except ValidationError as exc:
        raise _validation_error(path, exc, text) from None
    if path.stem != policy.tenant:
        raise PolicyError(
            f"{path}: tenant '{policy.tenant}' does not match the file name: "
            f"name the file '{policy.tenant}{path.suffix}' or set tenant: {path.stem}",
            param="tenant",
        )
    key_hashes = set(policy.keys) | _env_key_hashes(path, policy, environ)
    digest = hashlib.sha256(data).hexdigest()
    return LoadedPolicy(
        policy=policy,
        policy_id=f"{policy.tenant}@{digest[:7]}",
        path=path,
        key_hashes=frozenset(key_hashes),
        admin_key_hashes=frozenset(policy.admin_keys),
    )


def _env_key_hashes(path: Path, policy: Policy, environ: Mapping[str, str] | None) -> set[str]:
    if not policy.key_env:
        return set()
    env = os.environ if environ is None else environ
    raw_keys = split_env_keys(env.get(policy.key_env, ""))
    if not raw_keys:
        if not policy.keys:
            raise PolicyError(
                f"{path}: key_env: environment variable {policy.key_env} is not set or empty "
                "and 'keys' is empty, so no API key would reach this tenant",
                param="key_env",
            )
        log.warning("policy_key_env_empty", path=str(path), key_env=policy.key_env)
    if any(is_key_hash(k) for k in raw_keys):
        log.warning(
            "policy_key_env_holds_hash",
            path=str(path),
            key_env=policy.key_env,
            hint="key_env holds raw keys; put hashes in 'keys'",
        )
    return {hash_key(k) for k in raw_keys}


# --- YAML -----------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # unhashable key: construct_mapping reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key '{_short(key)}'", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(path: Path, data: bytes) -> tuple[object, str]:
    """The YAML document in ``data`` and its text."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return yaml.load(text, Loader=_StrictLoader), text  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        # Only the problem and its position: str(exc) quotes the file's text.
        mark = exc.problem_mark or exc.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}:" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        hint = "" if "duplicate key" in problem else " (check the indentation and quoting there)"
        raise PolicyError(f"{path}:{where} invalid YAML: {problem}{hint}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{path}: invalid YAML ({type(exc).__name__})") from None


def line_of(text: str, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the deepest node of ``loc`` (a pydantic error location) that the
    YAML ``text`` holds: the key itself for a mapping key; 1 when none is found."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return 1
    line = 0
    for seg in loc:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if getattr(k, "value", None) == str(seg)]
            if not found:
                break
            line, node = found[0][0].start_mark.line, found[0][1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and seg < len(node.value):
            node = node.value[seg]
            line = node.start_mark.line
        else:
            break
    return line + 1


def _yaml_kind(doc: object) -> str:
    if isinstance(doc, list):
        return "list"
    if isinstance(doc, str):
        return "string"
    return type(doc).__name__


# --- validation errors --------------------------------------------------------------------


def _validation_error(path: Path, exc: ValidationError, text: str) -> PolicyError:
    """One message: ``path:LINE: what`` for the first error, ``line N: what`` for the rest."""
    parts: list[str] = []
    params: list[str] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        field, what = describe_error(err)
        line = line_of(text, tuple(err["loc"]))
        part = f"{path}:{line}: {what}" if not parts else f"line {line}: {what}"
        if not any(p.endswith(what) for p in parts):
            parts.append(part)
            params.append(field)
    return PolicyError("; ".join(parts), param=params[0] if params else None)


def describe_error(err: ErrorDetails) -> tuple[str, str]:
    """Return ``(field path, message)`` for one pydantic error on :class:`Policy`."""
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden" and loc:
        parent, model = _walk(loc[:-1])
        prefix = f"{parent}." if parent else ""
        name = _short(loc[-1])
        full = f"{prefix}{name}"
        valid = list(model.model_fields) if model is not None else []
        lowered = {v.lower(): v for v in valid}
        match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
        if match:
            return full, f"unknown key '{full}' — did you mean '{prefix}{lowered[match[0]]}'?"
        where = f" under '{parent}'" if parent else ""
        return full, f"unknown key '{full}' — valid keys{where}: {', '.join(valid)}"
    field, _ = _walk(loc)
    msg = err["msg"].removeprefix("Value error, ")
    return field, f"{field}: {msg}" if field else msg


def _walk(loc: tuple[int | str, ...]) -> tuple[str, type[BaseModel] | None]:
    """Follow ``loc`` through the schema.

    Returns the dotted field path (list items as ``[i]``; union-member tags that
    pydantic appends are dropped) and the model class reached at the end, if any.
    """
    current: Any = Policy
    text = ""
    for seg in loc:
        model = _as_model(current)
        if model is not None:
            if not isinstance(seg, str) or seg not in model.model_fields:
                return text, None
            text = f"{text}.{seg}" if text else seg
            current = model.model_fields[seg].annotation
        elif typing.get_origin(current) in (list, dict):
            text = f"{text}[{seg}]" if isinstance(seg, int) else f"{text}.{_short(seg)}"
            current = typing.get_args(current)[-1]
        else:  # scalar or union of scalars: the rest are pydantic's union tags
            break
    return text, _as_model(current)


def _as_model(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(models) == 1:
            return models[0]
    return None


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 1] + "…"
