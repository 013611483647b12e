"""Issue 40 item 2: a value asserted as past, planned, hypothetical, someone's belief, of
another edition or variant, or in a keyword-stuffed line is not support for the present
claim — for the rules (guards.rules.check via guards.rules.scope) and for the framing of a claim."""

from __future__ import annotations

import pytest

from groundproxy.guards.rules.check import check_claim
from groundproxy.guards.rules.framing import frame
from groundproxy.guards.rules.scope import scoped, stuffed

HANDBOOK = (
    "Every Acme vacuum robot comes with a limited warranty of 12 months from the date of purchase."
)
CLAIM = "The Acme vacuum robot has a warranty of 48 months."
SCOPED = {
    "believe": "Some customers believe the warranty is 48 months, but they are wrong.",
    "until": "Until 2019 the warranty was 48 months.",
    "edition-table": "| Edition | Warranty |\n|---|---|\n| 2015 edition | 48 months |",
    "edition": "In the 2015 edition of this handbook, the robot warranty was 48 months.",
    "plans": "Acme plans to offer a warranty of 48 months in 2030.",
    "stuffed": "warranty 48 months Acme vacuum robot warranty 48 months warranty robot 48 months",
    "extended": "An extended plan can bring the Acme vacuum robot warranty to 48 months.",
    "formerly": "The Acme vacuum robot formerly had a warranty of 48 months.",
    "no-longer": "The Acme vacuum robot no longer has a warranty of 48 months.",
    "expected": "The Acme vacuum robot is expected to get a warranty of 48 months next year.",
    "could": "The Acme vacuum robot could have a warranty of 48 months.",
    "think": "Many people think the Acme vacuum robot has a warranty of 48 months.",
    "refurbished": "Refurbished Acme vacuum robots have a warranty of 48 months.",
}


@pytest.mark.parametrize("variant", sorted(SCOPED))
def test_a_scoped_value_supports_nothing(variant: str) -> None:
    doc = SCOPED[variant]
    # before: each of these stated 48 months as support (ok=True, alone or beside the
    # handbook, whose 12 months then gave no correction)
    alone = check_claim(CLAIM, [doc])
    assert not alone.ok and "48 months" in alone.missing
    beside = check_claim(CLAIM, [HANDBOOK, doc])
    assert not beside.ok and beside.correction == CLAIM.replace("48", "12")
    # nor does a scoped value correct another claim
    right = check_claim(CLAIM.replace("48", "12"), [HANDBOOK, doc])
    assert right.ok and right.correction is None


def test_a_claim_that_shares_the_scope_is_supported() -> None:
    assert check_claim("Until 2019 the warranty was 48 months.", [SCOPED["until"]]).ok
    claim = "Refurbished Acme vacuum robots have a warranty of 48 months."
    assert check_claim(claim, [SCOPED["refurbished"]]).ok
    claim = "The 2015 edition of the handbook gave a warranty of 48 months."
    assert check_claim(claim, [SCOPED["edition"]]).ok


@pytest.mark.parametrize(
    "doc",
    [
        "The Basic plan includes a warranty of 48 months.",  # "plan" the noun
        "The Acme vacuum robot has a warranty of 48 months, and an extended plan is sold.",
        "The Acme vacuum robot has a warranty of 48 months; older models had 24 months.",
        "Until 2019 it was sold in shops. The Acme vacuum robot has a warranty of 48 months.",
        "The warranty is valid until 2030 and covers the Acme vacuum robot for 48 months.",
    ],
)
def test_an_asserted_value_still_supports(doc: str) -> None:
    assert check_claim(CLAIM, [doc]).ok


def test_scope_reads_the_values_own_statement() -> None:
    text = "Until 2019 the warranty was 48 months."
    assert scoped(text, text.index("48"), CLAIM)
    assert not scoped(text, text.index("48"), "Until 2019 the warranty was 48 months.")
    text = "The warranty lasts until 2030."  # the bound year is the value itself
    assert not scoped(text, text.index("2030"), "The warranty lasts until 2030.")
    assert stuffed(SCOPED["stuffed"], 10)
    assert not stuffed("Dimensions 30 x 30 x 10 cm weight 3.4 kg battery 2600 mAh runtime", 0)


def test_framing_reads_a_scoped_sentence_as_a_mention() -> None:
    claim = "The Acme vacuum robot is waterproof."
    assert frame(claim, "Older Acme vacuum robot models were waterproof.") == "mentioned"
    assert frame(claim, "Some people believe the Acme vacuum robot is waterproof.") == "mentioned"
    assert frame(claim, "The Acme vacuum robot is waterproof.") == "asserted"


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        # a time bound inside another statement, before a comma (HaluEval train qa-5274)
        ("Life of Pi", "It received little attention outside Canada until 2004, after "
         'Martel\'s award-winning "Life of Pi" gained worldwide popularity.'),
        # a knowledge-graph line repeats its names, not a number: not stuffing (dialogue-6226)
        ("He won the award for Best Electronic Dance Music Video.",
         "Calvin Harris : `Award Won`: MTV Video Music Award for Best Electronic Dance Music "
         "VideoMTV Video Music Award for Best Electronic Dance Music Video : `~Award Won`: "
         "Calvin Harris"),
    ],
)  # fmt: skip
def test_train_sentences_that_stay_asserted(claim: str, evidence: str) -> None:
    assert frame(claim, evidence) == "asserted"
