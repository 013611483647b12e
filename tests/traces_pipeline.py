"""A three-step pipeline (summarize part A, summarize part B, combine) whose step 2 turns
"40 million" into "45 million": the scripted upstream, the documents and the requests."""

from __future__ import annotations

from typing import Any

PART_A = (
    "Northwind Traders opened a new warehouse in Lyon in 2021. The warehouse employs "
    "120 people and ships orders to 14 countries."
)
PART_B = (
    "In 2022 the annual revenue of Northwind Traders reached 40 million euros. Operating "
    "costs fell by 8 percent compared with the previous year."
)
SUMMARY_A = "Northwind opened a warehouse in Lyon in 2021. The warehouse employs 120 people."
SUMMARY_B = (
    "In 2022 the annual revenue of Northwind reached 45 million euros. Operating costs "
    "fell by 8 percent."
)
FINAL = (
    "Northwind opened a warehouse in Lyon in 2021 that employs 120 people. In 2022 the "
    "annual revenue of Northwind reached 45 million euros."
)
DOCS = [("reports/part-a.md", PART_A), ("reports/part-b.md", PART_B)]

SCRIPT: dict[str, Any] = {
    "default": "I do not know.",
    "rules": [
        {"match": "Summarize part A", "answer": SUMMARY_A},
        {"match": "Summarize part B", "answer": SUMMARY_B},
        {"match": "Combine the two summaries", "answer": FINAL},
    ],
}


def step_messages(step: int, inputs: list[str] | None = None) -> list[dict[str, str]]:
    """The chat messages of step 1, 2 or 3; each step's input rides in its system message."""
    if step == 1:
        return [
            {"role": "system", "content": PART_A},
            {"role": "user", "content": "Summarize part A in two sentences."},
        ]
    if step == 2:
        return [
            {"role": "system", "content": PART_B},
            {"role": "user", "content": "Summarize part B in two sentences."},
        ]
    joined = "\n\n".join(inputs or [])
    return [
        {"role": "system", "content": joined},
        {"role": "user", "content": "Combine the two summaries into one paragraph."},
    ]
