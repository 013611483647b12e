"""Issue 11 case 3 through the real path: a correction only from evidence about the same item."""

from __future__ import annotations

from groundproxy.proxy.serving.guarding import GuardService
from tests.verdict.conftest import guarded


def test_another_items_price_is_no_correction(verdict_guard: GuardService) -> None:
    # only item 50 is indexed: "Item 150" must not become "Item 50 costs 150 euros"
    report = guarded(verdict_guard, "item50", "Item 150 costs 450 euros.")
    (claim,) = report.claims
    assert claim.verdict != "supported" and claim.correction is None
    assert "Item 150" in claim.explanation
    assert report.text.startswith("Item 150 costs 450 euros")


def test_near_identical_documents_correct_from_the_named_item(verdict_guard: GuardService) -> None:
    # 150 near-identical items: a claim verbatim in item 3 stays; a wrong price of item 3
    # is corrected with item 3's price, never another item's
    verbatim = guarded(verdict_guard, "items", "Item 3 weighs 13 kg and costs 103 euros.")
    assert [c.verdict for c in verbatim.claims] == ["supported"]
    assert verbatim.text.startswith("Item 3 weighs 13 kg and costs 103 euros")
    wrong = guarded(verdict_guard, "items", "Item 3 weighs 13 kg and costs 99 euros.")
    (claim,) = wrong.claims
    assert claim.verdict == "contradicted"
    assert claim.correction == "Item 3 weighs 13 kg and costs 103 euros."
    assert [e.doc for e in claim.citations] == ["item3.md"]
