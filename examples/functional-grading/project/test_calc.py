"""The project's own test: run as `python test_calc.py` (exit 1 on a failure)."""

from calc import add  # type: ignore[import-not-found]  # the workspace's calc.py, beside this file

assert add(2, 3) == 5, f"add(2, 3) == {add(2, 3)}, expected 5"
assert add(-1, 1) == 0, f"add(-1, 1) == {add(-1, 1)}, expected 0"
print("2 checks passed")
