"""A claim supported only past a missing value (``rules.missing_support``) still takes the
correction its answer's other claim got for the same value (guards.rules.consistency)."""

from __future__ import annotations

from groundproxy.guards.rules.check import RuleResult, check_claim
from groundproxy.guards.rules.consistency import harmonize
from groundproxy.guards.types import Claim, ClaimResult, Evidence, Probs
from groundproxy.guards.verdict.decide import Bars, decide_claim

EVIDENCE = "The warranty of the Acme robot lasts 12 months from the date of purchase."
PROSE = "The warranty of the Acme robot lasts 24 months."
TABLE = "| Acme robot | 24 months |"
BARS = Bars(threshold=0.6, max_uncertainty=0.9, missing_support=0.5)


def _decide(text: str, evidence: list[str], p_supported: float) -> tuple[RuleResult, ClaimResult]:
    rule = check_claim(text, evidence)
    ev = [Evidence(t, "handbook.md", f"c{i}", 0.5, (0, len(t))) for i, t in enumerate(evidence)]
    rest = (1.0 - p_supported) / 2
    probs = [Probs(p_supported, rest, rest) for _ in ev]
    return rule, decide_claim(Claim(text, (0, len(text))), ev, probs, rule, BARS)


def test_a_value_corrected_elsewhere_is_corrected_past_the_missing_bar() -> None:
    prose_rule, prose = _decide(PROSE, [EVIDENCE], 0.95)
    # the table row's window does not state the months at all: a missing value, and the
    # verifier's support (0.95) is above the missing bar (0.8)
    table_rule, table = _decide(TABLE, ["The Acme robot ships with a charging dock."], 0.95)
    assert prose.verdict == "contradicted" and prose.correction
    assert not table_rule.ok and table_rule.missing and not table_rule.mismatches
    assert table.verdict == "supported"
    out = harmonize([prose_rule, table_rule], [prose, table])
    assert out[1].verdict == "contradicted"
    assert out[1].correction == "| Acme robot | 12 months |"
    assert "as corrected in" in out[1].explanation
