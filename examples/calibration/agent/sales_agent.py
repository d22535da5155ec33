"""A stand-in agent for the calibration example: adds up a shop's sales by region, with planted mistakes.

AgentV's cli target protocol, the simple way: reads the task from --prompt-file and prints its answer
(plain text) on stdout. It is deterministic, so the example's human labels stay true: for the shop
numbers below it gets the total wrong, leaves a region out, or writes a subtotal before the (correct)
total. Standard library only.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

WRONG_TOTAL = {2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 33, 37}
"""A slip in the addition: the total is off."""
MISSING_REGION = {4, 19, 35}
"""The last region is left out of the list (the total still counts it)."""
SUBTOTAL_FIRST = {10, 31, 39}
"""A correct answer that states a subtotal of the first two regions before the total."""


def answer(task: str) -> str:
    shop = int(re.search(r"shop S(\d+)", task).group(1))  # type: ignore[union-attr]
    figures = [(name, int(value)) for name, value in re.findall(r"([A-Z][a-z]+) (\d+)", task.split(":", 1)[1])]
    total = sum(v for _, v in figures)
    if shop in WRONG_TOTAL:
        total += 100 if shop % 2 else -90
    shown = figures[:-1] if shop in MISSING_REGION else figures
    lines = [f"Q3 sales of shop S{shop:02d}:"]
    lines += [f"- {name}: {value}" for name, value in shown]
    if shop in SUBTOTAL_FIRST:
        (a, x), (b, y) = figures[0], figures[1]
        lines.append(f"Subtotal {a} + {b}: {x + y}")
    lines.append(f"Total: {total}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt-file", required=True, type=Path)
    args = parser.parse_args()
    print(answer(args.prompt_file.read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
