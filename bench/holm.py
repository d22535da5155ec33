"""Holm's adjustment: our 10 lines (``calibration.holm``) against statsmodels' ``multipletests``.

The issue asks to use a well-kept library where one computes a statistic, unless a measured reason says
otherwise. statsmodels is not a dependency of evalstore; this measures what making it one would cost the
command that needs Holm (``evalstore compare BASE V1 V2 ...``), and checks that the two agree:

    python bench/holm.py [--repeat 20]      # needs statsmodels in this interpreter (pip install statsmodels)

It prints the median wall time of a fresh interpreter importing (a) nothing (``python -c pass``), (b)
``evalstore.replay.analysis.variants`` (what compare imports for several runs), (c) the same plus
``statsmodels.stats.multitest``, and the ratio (c - a) / (b - a): how many times the import cost of the
multi-run compare would grow. Then the largest difference between the two adjustments over 2,000 random
families of p-values (ties, None and sizes 1 to 20 included), which must be 0 up to float rounding.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import time


def _time(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if importlib.util.find_spec("statsmodels") is None:
        print("statsmodels is not installed in this interpreter: pip install statsmodels to measure")
        return
    codes = {
        "python -c pass": "pass",
        "import variants (ours)": "import evalstore.replay.analysis.variants",
        "import variants + statsmodels.stats.multitest": (
            "import evalstore.replay.analysis.variants, statsmodels.stats.multitest"
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(args.repeat):  # alternate, so load on the machine hits each alike
        for name, code in codes.items():
            times[name].append(_time(code))
    med = {name: statistics.median(v) for name, v in times.items()}
    floor = med["python -c pass"]
    for name, value in med.items():
        print(f"{name:48} {value * 1000:8.1f} ms")
    ours = med["import variants (ours)"] - floor
    theirs = med["import variants + statsmodels.stats.multitest"] - floor
    print(f"import cost with statsmodels / without: {theirs / ours:.1f}x ({(theirs - ours) * 1000:.0f} ms more)")

    from statsmodels.stats.multitest import multipletests

    from evalstore.replay.analysis.calibration import holm

    rng = random.Random(0)
    worst = 0.0
    for _ in range(2000):
        size = rng.randint(1, 20)
        ps: list[float | None] = [rng.choice([rng.random(), rng.random() ** 4, 0.05, None]) for _ in range(size)]
        given = [p for p in ps if p is not None]
        if not given:
            continue
        reference = iter(multipletests(given, method="holm")[1])
        for ours_p, p in zip(holm(ps), ps):
            if p is None:
                assert ours_p is None
            else:
                worst = max(worst, abs(ours_p - next(reference)))  # type: ignore[operator]
    print(f"largest |ours - statsmodels| over 2000 families: {worst:.3g} ({'met' if worst < 1e-12 else 'MISSED'})")


if __name__ == "__main__":
    main()
