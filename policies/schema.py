"""The tenant policy file, validated strictly (DESIGN.md, "Policy file").

Unknown keys are errors; :func:`policies.loader.load_policy_file` turns pydantic's
``extra_forbidden`` errors into messages that name the file, the field path and the
closest valid key.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
KEY_HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
INDEX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")

ActionName = Literal["annotate", "flag", "rewrite", "block"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpstreamPolicy(_Strict):
    model: str
    models: dict[str, str] = Field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    restrict_models: bool = False
    # "openai": the OpenAI wire protocol spoken directly (proxy.upstream.wire; cheaper);
    # "litellm": through litellm (any provider); "auto": "openai" for the model strings
    # litellm would send to an OpenAI-compatible API unchanged (``openai/…``), else litellm.
    transport: Literal["auto", "litellm", "openai"] = "auto"


class RetrievalPolicy(_Strict):
    index: str | None = None
    top_k: int = Field(default=3, ge=1, le=50)
    min_score: float = Field(default=0.25, ge=-1.0, le=1.0)
    use_request_context: bool = True
    # When the request's own messages and the tenant's documents state different values
    # for a claim: whose evidence decides (the other side is dropped for that claim and
    # the claim reports the conflict).
    conflict_winner: Literal["documents", "request"] = "documents"
    # Tenants that may use this policy's index, or whose index this policy may use: both
    # policies must list each other (policies.sharing).
    shared_with: list[str] = Field(default_factory=list)

    @field_validator("index")
    @classmethod
    def _index_name(cls, v: str | None) -> str | None:
        # An index name is a directory under the data folder: one safe path component.
        if v is not None and not INDEX_RE.fullmatch(v):
            raise ValueError(
                "index must be 1-255 chars of letters, digits, '_', '.' or '-', starting with "
                "a letter or digit (one folder name under the data directory)"
            )
        return v


class LadderPolicy(_Strict):
    """The verifier ladder (guards.verdict.ladder): every claim is scored by ``verifier.model`` (the
    fast rung); the claims it is unsure of are scored again by ``strong`` within ``budget_ms``,
    and the strong rung's verdict replaces the fast one. Claims still unsure go on to the
    judge (``judge:``) when the policy escalates."""

    # the strong rung's verifier (any verifier name), or "none": no ladder
    strong: str = "crossencoder"
    # escalate the claims whose ClaimResult.uncertainty (the fast rung's decision margin,
    # guards.verdict.uncertainty: 1 at its threshold, 0 where it is sure) is at least this; 0.7
    # chosen on held-out TRAIN rows (python -m bench.ladder: 100 seeded rows a file, 22 % of claims
    # escalated, mean balanced accuracy 0.679 vs 0.655 for embedhead alone)
    min_uncertainty: float = Field(default=0.7, ge=0.0, le=1.0)
    # at most this share of an answer's claims (rounded up: a 1-claim answer may escalate
    # its claim), most uncertain first; the others are marked skipped "share"
    max_share: float = Field(default=0.25, ge=0.0, le=1.0)
    # the strong rung's time per answer (and never past the guard's latency budget); claims
    # it would not finish in time keep the fast verdict, marked skipped "budget"
    budget_ms: int = Field(default=300, ge=0, le=600_000)


class VerifierPolicy(_Strict):
    model: str = "default"  # the fast rung: every claim
    # "model": the verifier's own fitted threshold (its meta.json ``threshold``; 0.6 for a
    # verifier without one); "calibrated": the tenant's calibration file; or a number.
    threshold: float | Literal["calibrated", "model"] = "model"
    # the most normalized entropy (0 sure, 1 uniform) of the best passage's three
    # probabilities a supported verdict may have; not the claims' reported ``uncertainty``
    # (the decision margin, guards.verdict.uncertainty)
    max_uncertainty: float = Field(default=0.9, ge=0.0, le=1.0)
    # The answer-level decision when the tenant has no adapter of its own: "every_claim"
    # (rejected when any claim is not supported) or "learned" (the verifier's shipped
    # answer combiner, fitted on ../shared/data/train: models/<verifier>/answer-combiner.json).
    decision: Literal["every_claim", "learned"] = "every_claim"
    ladder: LadderPolicy = Field(default_factory=LadderPolicy)

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold(cls, v: object) -> object:
        # One clear error instead of pydantic's two union-member errors; also
        # rejects booleans (YAML ``yes``) and values outside [0, 1].
        if v in ("calibrated", "model") and isinstance(v, str):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool) and 0.0 <= v <= 1.0:
            return float(v)
        raise ValueError("threshold must be a number in [0, 1], 'model' or 'calibrated'")


class RulesPolicy(_Strict):
    numbers_need_evidence: bool = True
    entities_need_evidence: bool = True
    # a claim with a number or name no passage states (a missing value; a value stated
    # otherwise is a mismatch and contradicts) is supported only when the verifier's
    # P(supported) reaches threshold + missing_support × (1 − threshold): 1 = never
    missing_support: float = Field(default=0.5, ge=0.0, le=1.0)


class ActionsPolicy(_Strict):
    contradicted: ActionName = "rewrite"
    unverifiable: ActionName = "flag"
    block_below_trust: float = Field(default=0.2, ge=0.0, le=1.0)
    flag_marker: str = " [unverified]"
    refusal: str = (
        "I can't give a reliable answer to that: the response could not be verified "
        "against the available sources."
    )


class TracesPolicy(_Strict):
    """Multi-step traces (VeriTrail): each guarded generation stored as a DAG node."""

    enabled: bool = True
    retention_hours: float = Field(default=168.0, gt=0)
    max_nodes: int = Field(default=100_000, ge=1)


class JudgePolicy(_Strict):
    """Escalation of claims to an LLM judge (guards.judge.opinion; DESIGN twin, "Judge escalation").
    ``model`` / ``api_base`` / ``api_key_env`` default to the tenant's upstream's."""

    model: str | None = None  # any litellm model string
    api_base: str | None = None
    api_key_env: str | None = None
    # uncertain: claims whose uncertainty ≥ min_uncertainty; not_supported: claims whose
    # verdict is not supported; all: every claim; none: the judge is never called.
    escalate: Literal["uncertain", "not_supported", "all", "none"] = "none"
    max_claims: int = Field(default=8, ge=1, le=64)  # per answer, most uncertain first
    timeout_ms: int = Field(default=3000, ge=1, le=600_000)
    max_calls_per_minute: int = Field(default=600, ge=0)  # per tenant; past it: rate_limit
    # judge calls one request may make (a sentence stream's pieces, a request's choices or
    # prompts together); past it the claims are skipped: budget
    max_calls_per_request: int = Field(default=8, ge=1, le=256)
    # escalate: uncertain — the least ClaimResult.uncertainty escalated (None: the guard's
    # default, guards.judge.opinion.DEFAULT_MIN_UNCERTAINTY)
    min_uncertainty: float | None = Field(default=None, ge=0.0, le=1.0)
    # judged answers become feedback labels for the tenant's adapter (calibrate --fit)
    labels: bool = False
    # no more judge labels once the tenant's label store is this large (bytes)
    max_label_store_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    # of the answers a decision decides alone (an adapter sure of it, or zero-shot proven
    # on the tenant's labels), this share is judged anyway, every claim (picked by a hash of
    # the answer): labels keep coming from ordinary traffic, so a fit can see drift
    audit: float = Field(default=0.05, ge=0.0, le=1.0)


class Policy(_Strict):
    tenant: str
    keys: list[str] = Field(default_factory=list)
    key_env: str | None = None
    admin_keys: list[str] = Field(default_factory=list)
    upstream: UpstreamPolicy
    retrieval: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    verifier: VerifierPolicy = Field(default_factory=VerifierPolicy)
    rules: RulesPolicy = Field(default_factory=RulesPolicy)
    actions: ActionsPolicy = Field(default_factory=ActionsPolicy)
    citations: Literal["none", "inline", "footnotes"] = "footnotes"
    stream: Literal["buffer", "sentence"] = "sentence"
    on_guard_error: Literal["annotate", "block"] = "annotate"
    latency_budget_ms: int = Field(default=800, ge=1)
    # When the guard queue would not answer within the budget (proxy.serving.admission): wait
    # anyway (queue), answer at once marked unverified (refused under on_guard_error:
    # block), or answer 429 with retry-after (reject).
    on_overload: Literal["queue", "unverified", "reject"] = "queue"
    # on_overload: queue — a request first waits, before its upstream call, until a guard
    # starting now would end within the budget (at most this long; 0: no wait at arrival).
    max_queue_ms: int = Field(default=30_000, ge=0)
    # Characters of an answer the guard verifies; the rest is returned marked unverified
    # (withheld under on_guard_error: block).
    max_answer_chars: int = Field(default=6000, ge=100)
    # Streams: the whole stream ends (an SSE error event) past this; sentence mode sends a
    # held piece with no sentence end after max_hold_ms (verified if time allows, else marked).
    stream_deadline_ms: int = Field(default=300_000, ge=1)
    max_hold_ms: int = Field(default=2000, ge=1)
    guard: bool = True
    traces: TracesPolicy = Field(default_factory=TracesPolicy)
    judge: JudgePolicy = Field(default_factory=JudgePolicy)

    @field_validator("tenant")
    @classmethod
    def _tenant_name(cls, v: str) -> str:
        if not TENANT_RE.match(v):
            raise ValueError(
                "tenant must be 1-63 chars of lower-case letters, digits, '-' or '_', "
                "starting with a letter or digit"
            )
        return v

    @field_validator("keys", "admin_keys")
    @classmethod
    def _hashed_keys(cls, v: list[str], info: ValidationInfo) -> list[str]:
        # The message names the position only: a raw key must never be echoed.
        for i, k in enumerate(v):
            if not KEY_HASH_RE.match(k):
                raise ValueError(
                    f"{info.field_name}[{i}] is not a key hash: keys are stored hashed only, "
                    "each must be 'sha256:' + 64 lower-case hex digits "
                    "(groundproxy hash-key KEY prints it)"
                )
        return v

    @model_validator(mode="after")
    def _has_keys(self) -> Policy:
        if not self.keys and not self.key_env:
            raise ValueError("a policy needs 'keys' (sha256 hashes) or 'key_env'")
        return self

    @model_validator(mode="after")
    def _judge_key_stays_home(self) -> Policy:
        # The judge borrows the upstream's key only where it goes to the upstream's own host:
        # a judge elsewhere with no key variable of its own would receive the tenant's key.
        judge, up = self.judge, self.upstream
        calls = judge.escalate != "none"
        if calls and judge.api_key_env is None and up.api_key_env and not _same_host(judge, up):
            raise ValueError(
                f"judge.api_base ({_host_of(judge.api_base)}) is not the upstream's host "
                f"({_host_of(up.api_base)}): the upstream key (upstream.api_key_env) is never "
                "sent to another host; set judge.api_key_env (the judge's own key variable)"
            )
        return self

    @property
    def index_name(self) -> str:
        return self.retrieval.index or self.tenant


def _host_of(api_base: str | None) -> str:
    """The host name of an ``api_base`` ("the provider's default" for None)."""
    if api_base is None:
        return "the provider's default"
    try:
        host = urlsplit(api_base).hostname
    except ValueError:
        host = None
    return (host or api_base[:80]).lower()


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def _same_host(judge: JudgePolicy, up: UpstreamPolicy) -> bool:
    """Would the judge's calls go to the host the upstream key is for? A judge without
    ``api_base`` goes to the upstream's (or, neither set, to its model's provider)."""
    if judge.api_base is None:
        if up.api_base is not None or judge.model is None:
            return True
        return _provider(judge.model) == _provider(up.model)
    if up.api_base is None:
        return False
    return _host_of(judge.api_base) == _host_of(up.api_base)


# A hash no key can have (the sha256 of anything is never all zeros in practice): policies
# built in-process for eval, warm-up, benchmarks and tests accept no API key at all.
NO_KEY_HASH = "sha256:" + "0" * 64


def local_policy(tenant: str = "local", upstream_model: str = "none", **fields: object) -> Policy:
    """A validated policy for in-process use (eval, calibration, warm-up, benchmarks, tests):
    DESIGN's defaults, no usable key, top-level ``fields`` overriding the defaults."""
    data: dict[str, object] = {
        "tenant": tenant,
        "keys": [NO_KEY_HASH],
        "upstream": {"model": upstream_model},
    }
    data.update(fields)
    return Policy.model_validate(data)
