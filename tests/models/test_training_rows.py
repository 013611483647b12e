"""The train-split selection is one function: the verifier's trainer and the answer
combiner's out-of-sample pools read the same rows (training.prepare.training_rows)."""

from __future__ import annotations

import json
from pathlib import Path

from training.prepare import (
    collect_examples,
    in_validation,
    sampled_rows,
    training_rows,
)


def _rows(n: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"r{i}",
            "context": f"Document {i // 2} says the fee is {i} euros.",
            "response": f"The fee is {i} euros.",
            "label_hallucinated": i % 2,
        }
        for i in range(n)
    ]


def test_sample_is_seeded_capped_and_per_source() -> None:
    rows = _rows(60)
    a = sampled_rows(rows, "src", cap=20)
    assert len(a) == 20 and a == sampled_rows(rows, "src", cap=20)
    assert [r["id"] for r in a] != [r["id"] for r in sampled_rows(rows, "other", cap=20)]
    assert sampled_rows(rows, "src", cap=100) == rows


def test_training_rows_are_the_sample_less_the_held_out_contexts() -> None:
    rows = _rows(400)
    kept = training_rows(rows, "src", cap=300, val_frac=0.15)
    sample = sampled_rows(rows, "src", cap=300)
    held = [r for r in sample if in_validation(str(r["context"]), 0.15)]
    assert 0 < len(held) < len(sample)
    assert len(kept) + len(held) == len(sample)
    assert not {r["context"] for r in kept} & {r["context"] for r in held}


def test_collect_examples_trains_on_exactly_training_rows(tmp_path: Path) -> None:
    rows = _rows(90)
    (tmp_path / "train").mkdir()
    with (tmp_path / "train" / "toy.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    records, _, _ = collect_examples(tmp_path, cap=50, synth_per_source=0)
    trained = {r["row"] for r in records if r["kind"] == "row" and r["split"] == "train"}
    assert trained == {str(r["id"]) for r in training_rows(rows, "toy", cap=50)}
    assert trained  # the toy file has rows on both sides of the split
