"""guards.rules.framing / guards.rules.polarity: what is not a denial.

Before: "Wasps No 8 Nathan Hughes" read as "no", so a passage naming a shirt number (or
"world No 1") denied every claim it covered, and "have not won since February 2011" denied
the date; the rules removed such true claims from answers (HaluEval train summaries,
``bench.rewrite --data …/train``)."""

from __future__ import annotations

from groundproxy.guards.rules.framing import frame
from groundproxy.guards.rules.polarity import denied, words_between


def test_a_number_sign_is_not_a_negation() -> None:
    claim = "The winger was knocked out by Nathan Hughes in the first half."
    evidence = "The winger was knocked out by Wasps No 8 Nathan Hughes in the first half."
    assert frame(claim, evidence) == "asserted"
    world = "World No 1 Rory Smith equalled the record of 29 rounds."
    assert frame("Rory Smith equalled the record of 29 rounds.", world) == "asserted"
    assert not denied(world, world.index("29"))
    assert words_between("No 8 and No. 1", 0, 14) == ["and"]


def test_a_real_no_still_denies() -> None:
    claim = "The Wasps No 8 scored the winning try."
    assert frame(claim, "The Wasps No 8 never scored the winning try.") == "denied"
    assert frame("The robot has a warranty.", "No robot has a warranty.") == "denied"
    text = "There is no 24 month warranty."
    assert denied(text, text.index("24"))


def test_a_date_after_since_is_asserted_not_denied() -> None:
    # before: "not … since May 2019" read as denying May 2019, so a right summary
    # ("… have not won there since May 2019") was "contradicted" by an article that says
    # the same and removed
    claim = "The Rovers have not won at home since May 2019."
    assert not denied(claim, claim.index("May"))
    bout = "The champion has not fought since beating Jon Reyes in November 2021."
    assert not denied(bout, bout.index("2021"))
    # a negation after "since" still denies: "since then it has not cost 40 dollars"
    text = "Since the sale, the lamp does not cost 40 dollars."
    assert denied(text, text.index("40"))
    warranty = "The warranty does not last 48 months."
    assert denied(warranty, warranty.index("48"))
