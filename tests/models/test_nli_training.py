"""The cross-encoder trainer reads the NLI pairs (issue 42): per-set sampling, two-way rows
as "not supported", held-back premises, the restricted file refused.

Unit tests over the loader, and one real (tiny) training run of training.cross_encoder
on the packaged MiniLM backbone with a vendored seeded slice of the permissive file
(tests/data/nli, licences in tests/data/README.md) beside two train files.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from training import nli
from training.prepare import TARGETS, in_validation

DATA = Path(__file__).resolve().parents[1] / "data"
SLICE = DATA / "nli" / "nli-permissive.jsonl.gz"


def test_the_restricted_file_trains_only_a_research_variant(tmp_path: Path) -> None:
    restricted = tmp_path / nli.RESTRICTED
    shutil.copy(SLICE, restricted)
    with pytest.raises(nli.RestrictedDataError, match="research variant"):
        nli.read_rows(restricted)
    assert len(nli.read_rows(restricted, research=True)) == 80


def test_two_way_negatives_are_not_supported_and_three_way_rows_keep_their_label() -> None:
    records, pairs = nli.nli_examples(SLICE)
    assert len(records) == len(pairs) == 80
    by_set: dict[str, set[int]] = {}
    for r in records:
        by_set.setdefault(r["source"], set()).add(r["target"])
    # DocNLI is two-way: its negatives are "not supported", never guessed as contradiction
    assert by_set["nli:DocNLI:binary-MNLI"] <= {TARGETS["supported"], TARGETS["not_supported"]}
    assert TARGETS["not_supported"] in by_set["nli:DocNLI:binary-MNLI"]
    assert TARGETS["contradicted"] in by_set["nli:SNLI(e-SNLI)"]
    three_way = {r["source"] for r in records if r["three_way"]}
    assert "nli:SNLI(e-SNLI)" in three_way and "nli:DocNLI:binary-MNLI" not in three_way
    assert {r["split"] for r in records} <= {"train", "val"}
    claim, evidence = pairs[0]
    assert claim and evidence


def test_a_cap_samples_each_set_and_the_share_holds_the_nli_mass() -> None:
    records, _ = nli.nli_examples(SLICE, cap=3)
    counts: dict[str, int] = {}
    for r in records:
        counts[r["source"]] = counts.get(r["source"], 0) + 1
    assert set(counts.values()) == {3} and len(counts) == 10
    again, _ = nli.nli_examples(SLICE, cap=3)
    assert [r["row"] for r in again] == [r["row"] for r in records]  # seeded
    sources = ["nli:a", "nli:a", "nli:b", "halueval-qa", "fever-nli", "fever-nli"]
    w = nli.mixed_weights(sources, np.full(6, 1 / 6), 0.25)
    assert abs(w.sum() - 1.0) < 1e-12
    assert abs(w[:3].sum() - 0.25) < 1e-12 and abs(w[3:].sum() - 0.75) < 1e-12


@pytest.mark.slow
def test_a_tiny_run_trains_on_nli_and_reports_held_back_accuracy(tmp_path: Path) -> None:
    from training.cross_encoder import main

    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    for name in ("fever-nli.jsonl", "halueval-qa.jsonl"):
        lines = (DATA / "train" / name).read_text(encoding="utf-8").splitlines()
        rows = random.Random(f"nli-run:{name}").sample(lines, 40)
        (data / "train" / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    # the premises the split holds back: only their sets can have a held-back accuracy
    held = [r for r in nli.read_rows(SLICE) if in_validation(r["context"], nli.VAL_FRAC)]
    out = tmp_path / "ckpt"
    main(["--data", str(data), "--out", str(out), "--steps", "3", "--batch-size", "4",
          "--threads", "1", "--device", "cpu", "--nli", str(SLICE),
          "--nli-share", "0.5"])  # fmt: skip
    manifest = json.loads((out / "ce_manifest.json").read_text(encoding="utf-8"))
    assert manifest["data_files"]["nli/nli-permissive.jsonl.gz"]
    assert manifest["settings"]["nli_share"] == "0.5" and manifest["complete"] is True
    nli_sources = {k for k in manifest["validation"]["per_source"] if k.startswith("nli:")}
    three_way = manifest["validation"]["nli_three_way_accuracy"]
    assert set(three_way) <= nli_sources | {f"nli:{r['source']}" for r in held}
    assert all(0.0 <= v <= 1.0 for v in three_way.values())
    assert (out / "model.safetensors").is_file()
