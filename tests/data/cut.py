"""Cut the small seeded slices under ``tests/data/`` from the full data beside the clone.

    python tests/data/cut.py [--from ../shared/data]

Each slice is a seeded sample of whole rows (``random.Random(f"tests-data:{file}")``, rows
kept in their file order), so running this again on the same source writes the same bytes.
The tests read only these slices; ``../shared/data`` stays the place for full training and
evaluation (``bench/``, ``training/``). What each slice is for: ``tests/data/README.md``.
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (folder, file, rows): eval rows for the TF-IDF parity test (every eval file) and the
# calibrate command; train rows for the cross-encoder trainer's resume test.
SLICES: list[tuple[str, str, int]] = [
    *[
        ("eval", name, 10)
        for name in (
            "begin-dev-wow.jsonl",
            "halueval-dialogue.jsonl",
            "halueval-summarization.jsonl",
            "q2.jsonl",
            "summedits.jsonl",
            "wice-article.jsonl",
            "wice-oracle.jsonl",
        )
    ],
    ("eval", "halueval-qa.jsonl", 120),
    ("train", "fever-nli.jsonl", 60),
    ("train", "halueval-qa.jsonl", 60),
]
# the licence texts of the slices' sources (../shared/data/LICENSES)
LICENCES = [
    "BEGIN-WoW.CC-BY-4.0.txt",
    "BEGIN-WoW.NOTICE.txt",
    "HaluEval.MIT.txt",
    "SummEdits.Apache-2.0.txt",
    "WiCE.md",
    "q2.LICENSE.txt",
    "fever_nli_dev.LICENSE.txt",
]


def cut(source: Path, dest: Path = HERE) -> list[Path]:
    """Write every slice and licence from ``source`` into ``dest``; return the files."""
    written: list[Path] = []
    for folder, name, n in SLICES:
        lines = (source / folder / name).read_text(encoding="utf-8").splitlines()
        keep = sorted(random.Random(f"tests-data:{folder}/{name}").sample(range(len(lines)), n))
        out = dest / folder / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(lines[i] + "\n" for i in keep), encoding="utf-8")
        written.append(out)
    (dest / "LICENSES").mkdir(exist_ok=True)
    for name in LICENCES:
        written.append(Path(shutil.copyfile(source / "LICENSES" / name, dest / "LICENSES" / name)))
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = HERE.parents[2] / "shared" / "data"
    ap.add_argument("--from", dest="source", type=Path, default=default)
    for path in cut(ap.parse_args().source):
        print(path.relative_to(HERE))


if __name__ == "__main__":
    main()
