"""A stricter test than the project's: add() must also sum any number of arguments."""

from calc import add  # type: ignore[import-not-found]  # the workspace's calc.py, beside this file

assert add(2, 3) == 5, f"add(2, 3) == {add(2, 3)}, expected 5"
try:
    total = add(1, 2, 3)
except TypeError as exc:
    raise AssertionError(f"add(1, 2, 3) failed: {exc}") from None
assert total == 6, f"add(1, 2, 3) == {total}, expected 6"
print("3 checks passed")
