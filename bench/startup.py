"""Start-up time of the command line (issue: "evalstore --version takes 0.6 s").

Each command is started as a fresh process the same way (``python -m ...`` under this interpreter), many
times in alternation, and the median wall time is compared with ``python -c pass`` from the same run:

    python bench/startup.py [--repeat 30]

Targets: ``--version`` within 3x, ``--help`` within 5x and every command's ``--help`` within 3x of
``python -c pass``; ``evalstore runs`` on an
empty (already created) store under 0.25 s;
``import evalstore.grader`` (what a Python code grader using the SDK pays) within 2x. ``import click`` is printed too: it alone costs about 2x.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.user_env import USER_ENV as ENV  # noqa: E402
from evalstore.cli import COMMANDS  # noqa: E402


def _time(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        # A read never creates a store: create it with a command that writes.
        subprocess.run([py, "-m", "evalstore", "db", "upgrade"], cwd=cwd, check=True, capture_output=True, timeout=60)
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import click'": [py, "-c", "import click"],
            "python -c 'import evalstore.grader'": [py, "-c", "import evalstore.grader"],
            "evalstore --version": [py, "-m", "evalstore", "--version"],
            "evalstore --help": [py, "-m", "evalstore", "--help"],
            "evalstore runs (empty store)": [py, "-m", "evalstore", "runs"],
            # What any command that opens a SQLite store must load, whatever evalstore does: its floor.
            "import click, sqlalchemy + sqlite": [py, "-c", "import click, sqlalchemy, sqlalchemy.dialects.sqlite"],
            # Every command's own --help (issue 30: each within 3x): it imports its module, not the layers.
            **{f"evalstore {name} --help": [py, "-m", "evalstore", name, "--help"] for name in COMMANDS},
        }
        for argv in commands.values():  # once untimed: the bytecode caches are written
            _time(argv, cwd)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):  # alternate, so load on the machine hits every command alike
            for name, argv in commands.items():
                times[name].append(_time(argv, cwd))
    floor = statistics.median(times["python -c pass"])
    print(f"{'command':36} {'median':>9} {'x floor':>8}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:36} {median * 1000:7.1f}ms {median / floor:7.2f}x")
    version = statistics.median(times["evalstore --version"]) / floor
    help_ = statistics.median(times["evalstore --help"]) / floor
    runs = statistics.median(times["evalstore runs (empty store)"])
    sdk = statistics.median(times["python -c 'import evalstore.grader'"]) / floor
    libraries = statistics.median(times["import click, sqlalchemy + sqlite"])
    worst = max((statistics.median(times[f"evalstore {name} --help"]) / floor, name) for name in COMMANDS)
    print(
        f"targets: --version {version:.2f}x (<= 3), --help {help_:.2f}x (<= 5), runs {runs:.3f} s (< 0.25), "
        f"import evalstore.grader {sdk:.2f}x (<= 2), slowest command's --help ({worst[1]}) {worst[0]:.2f}x (<= 3)"
    )
    print(f"runs against its library floor (click + SQLAlchemy + its SQLite dialect): {runs / libraries:.2f}x")


if __name__ == "__main__":
    main()
