"""The returned text: each action, each citation style, markdown kept intact."""

from __future__ import annotations

import pytest

from groundproxy.guards.action import render
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.types import ClaimResult, Evidence, Probs, Verdict
from groundproxy.guards.verdict.decide import rendered_trust
from groundproxy.policies.schema import Policy, local_policy

SUP = Probs(0.9, 0.02, 0.08)
CON = Probs(0.05, 0.85, 0.10)
UNV = Probs(0.3, 0.1, 0.6)
PROBS = {"supported": SUP, "contradicted": CON, "unverifiable": UNV}
FIXED = "The warranty lasts 12 months."


def policy(**overrides: object) -> Policy:
    return local_policy("acme", "openai/gpt-4o-mini", **{"citations": "none", **overrides})


def ev(doc: str, chunk: str, text: str = "Evidence text.") -> Evidence:
    return Evidence(text, doc, chunk, 0.8, (0, len(text)))


def results(
    answer: str, plan: dict[str, tuple[Verdict, str | None, Evidence | None]]
) -> list[ClaimResult]:
    """ClaimResults for ``answer``'s claims: text → (verdict, correction, citation)."""
    out = []
    for c in decompose(answer):
        verdict, correction, cite = plan.get(c.text, ("supported", None, None))
        p = PROBS[verdict]
        out.append(
            ClaimResult(
                c,
                verdict,
                p,
                p.uncertainty(),
                citations=[cite] if cite else [],
                correction=correction,
                correction_support=0.8 if correction else None,
            )
        )
    return out


def test_rewrite_corrects_a_contradicted_claim() -> None:
    answer = "The warranty lasts 24 months. Returns take 30 days."
    rs = results(answer, {"The warranty lasts 24 months.": ("contradicted", FIXED, None)})
    out = render(answer, rs, policy(), "rewrite")
    assert out.text == "The warranty lasts 12 months. Returns take 30 days."
    assert [r.action for r in rs] == ["corrected", "kept"]
    assert out.trust == pytest.approx((0.8 + 0.9) / 2)  # the correction counts as supported
    assert not out.blocked and out.action == "rewrite"


def test_rewrite_removes_unsupported_sentences_and_tidies() -> None:
    answer = "Returns take 30 days. The moon is cheese. Support is free."
    rs = results(answer, {"The moon is cheese.": ("unverifiable", None, None)})
    out = render(answer, rs, policy(actions={"unverifiable": "rewrite"}), "rewrite")
    assert out.text == "Returns take 30 days. Support is free."
    assert [r.action for r in rs] == ["kept", "removed", "kept"]
    assert out.trust == pytest.approx(0.9)  # the removed claim drops out


def test_removing_a_clause_takes_its_connector_along() -> None:
    answer = "X was born in 1950, and he moved to Paris in 1970."
    pol = policy(actions={"unverifiable": "rewrite"})
    right = results(answer, {"he moved to Paris in 1970.": ("unverifiable", None, None)})
    assert render(answer, right, pol, "rewrite").text == "X was born in 1950."
    left = results(answer, {"X was born in 1950": ("unverifiable", None, None)})
    assert render(answer, left, pol, "rewrite").text == "He moved to Paris in 1970."


def test_markdown_list_survives_removal() -> None:
    answer = "Our plans:\n\n- Basic costs $12.\n- Pro costs $25.\n- Max costs $40.\n\nThat is all."
    rs = results(answer, {"Pro costs $25.": ("unverifiable", None, None)})
    out = render(answer, rs, policy(actions={"unverifiable": "rewrite"}), "rewrite")
    assert out.text == "Our plans:\n\n- Basic costs $12.\n- Max costs $40.\n\nThat is all."


def test_code_block_and_heading_are_untouched() -> None:
    answer = (
        "## Warranty\n\nThe warranty lasts 24 months.\n\n"
        "```\n# The warranty lasts 24 months.\nprint(24)\n```\n"
    )
    rs = results(answer, {"The warranty lasts 24 months.": ("contradicted", FIXED, None)})
    assert len(rs) == 1
    out = render(answer, rs, policy(), "rewrite")
    assert out.text == answer.replace(
        "\n\nThe warranty lasts 24 months.", "\n\nThe warranty lasts 12 months.", 1
    )
    assert "```\n# The warranty lasts 24 months.\nprint(24)\n```" in out.text


def test_flag_inserts_the_marker_after_the_claim() -> None:
    answer = "Returns take 30 days. The moon is cheese."
    rs = results(answer, {"The moon is cheese.": ("unverifiable", None, None)})
    out = render(answer, rs, policy(), "flag")
    assert out.text == "Returns take 30 days. The moon is cheese [unverified]."
    assert [r.action for r in rs] == ["kept", "flagged"]
    custom = render(answer, rs, policy(actions={"flag_marker": " (?)"}), "flag")
    assert custom.text == "Returns take 30 days. The moon is cheese (?)."


def test_annotate_leaves_the_text() -> None:
    answer = "Returns take 30 days. The moon is cheese."
    rs = results(answer, {"The moon is cheese.": ("contradicted", None, None)})
    out = render(answer, rs, policy(actions={"contradicted": "annotate"}), "annotate")
    assert out.text == answer
    assert [r.action for r in rs] == ["kept", "annotated"]
    assert out.trust == pytest.approx(0.9 / 2)  # a contradicted claim left in counts 0


def test_block_returns_the_refusal() -> None:
    answer = "The warranty lasts 24 months."
    rs = results(answer, {answer: ("contradicted", None, None)})
    pol = policy(actions={"contradicted": "block", "refusal": "Sorry, no."})
    out = render(answer, rs, pol, "block")
    assert out.text == "Sorry, no." and out.blocked and out.action == "block"
    assert [r.action for r in rs] == ["blocked"]


def test_removing_every_claim_blocks() -> None:
    answer = "Sure! The moon is cheese."
    rs = results(answer, {"The moon is cheese.": ("unverifiable", None, None)})
    out = render(answer, rs, policy(actions={"unverifiable": "rewrite"}), "rewrite")
    assert out.blocked and out.text == policy().actions.refusal


def test_inline_citations_number_distinct_chunks() -> None:
    answer = "Returns take 30 days. Refunds are issued in 5 days. Shipping is free."
    a, b = ev("faq.md", "c3"), ev("handbook.md", "c12")
    rs = results(
        answer,
        {
            "Returns take 30 days.": ("supported", None, a),
            "Refunds are issued in 5 days.": ("supported", None, b),
            "Shipping is free.": ("supported", None, a),
        },
    )
    out = render(answer, rs, policy(citations="inline"), "none")
    assert out.text == (
        "Returns take 30 days [1]. Refunds are issued in 5 days [2]. Shipping is free [1]."
    )


def test_footnotes_add_a_sources_block() -> None:
    answer = "- Returns take 30 days.\n- The warranty lasts 24 months."
    a = ev("faq.md", "c3", "Returns are accepted within 30 days.\nUnused items only.")
    b = ev("handbook.md", "c12", "The warranty lasts 12 months. " + "x" * 200)
    rs = results(
        answer,
        {
            "Returns take 30 days.": ("supported", None, a),
            "The warranty lasts 24 months.": ("contradicted", "The warranty lasts 12 months.", b),
        },
    )
    out = render(answer, rs, policy(citations="footnotes"), "rewrite")
    body, sources = out.text.split("\n\nSources:\n")
    assert body == "- Returns take 30 days [1].\n- The warranty lasts 12 months [2]."
    lines = sources.split("\n")
    assert lines[0] == '[1] faq.md#c3 — "Returns are accepted within 30 days. Unused items only."'
    assert lines[1].startswith('[2] handbook.md#c12 — "The warranty lasts 12 months. xx')
    assert lines[1].endswith('…"') and len(lines[1]) < 140


def test_unverifiable_claims_get_no_citation_marker() -> None:
    answer = "Returns take 30 days. The moon is cheese."
    rs = results(answer, {"The moon is cheese.": ("unverifiable", None, ev("faq.md", "c9"))})
    pol = policy(citations="inline", actions={"unverifiable": "annotate"})
    out = render(answer, rs, pol, "annotate")
    assert out.text == answer


def test_rendered_trust_with_nothing_left() -> None:
    assert rendered_trust([]) == 1.0


@pytest.mark.parametrize(
    ("answer", "bad", "expected"),
    [
        (
            "| Plan | Price |\n|---|---|\n| Pro | $25 |\n| Max | $40 |",
            "$25",
            "| Plan | Price |\n|---|---|\n| Pro |  |\n| Max | $40 |",
        ),
        (
            "Intro is here.\n\n> The moon is cheese.\n\nOutro is here.",
            "The moon is cheese.",
            "Intro is here.\n\nOutro is here.",
        ),
        ("First is fine.\n\nThe moon is cheese.", "The moon is cheese.", "First is fine."),
        (
            "The shop sells bikes; the moon is made of cheese; it also repairs them.",
            "the moon is made of cheese",
            "The shop sells bikes; it also repairs them.",
        ),
    ],
)
def test_removal_keeps_structure(answer: str, bad: str, expected: str) -> None:
    rs = results(answer, {bad: ("unverifiable", None, None)})
    out = render(answer, rs, policy(actions={"unverifiable": "rewrite"}), "rewrite")
    assert out.text == expected
    assert [r.action for r in rs if r.claim.text == bad] == ["removed"]
