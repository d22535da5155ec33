"""One suite made of several eval files: what a plain import of an AgentV run grades with.

An AgentV run may cover several eval files, and when the eval file it ran is not readable each test's
own bundled copy (``task/EVAL.yaml`` in a v4 run, ``test/EVAL.yaml`` in a v5 bundle) is all there is:
one file per test. The suite of such a run is the union of those files' tests, so a replay regrades
every test instead of the first file's.
"""

from __future__ import annotations

from evalstore.replay.evalfile.specs import EvalSuite


def union_suite(parts: list[EvalSuite]) -> EvalSuite:
    """The first part with the tests of every part (a test id the first part that has it wins). Suite
    settings (threshold, converters, workspace, target) are the first part's: the parts of a run's
    bundled copies were written from one eval. Every other part is an ``eval`` reference, so a
    snapshot of the union holds every file and a replay of it loads the same union again."""
    if len(parts) == 1:
        return parts[0]
    first, seen = parts[0], {t.id for t in parts[0].tests}
    tests, referenced = list(first.tests), list(first.referenced_files)
    warnings, roots = list(first.warnings), list(first.search_roots)
    for part in parts[1:]:
        tests.extend(t for t in part.tests if t.id not in seen)
        seen.update(t.id for t in part.tests)
        referenced.append(("eval", part.path, None))
        referenced.extend(part.referenced_files)
        warnings.extend(w for w in part.warnings if w not in warnings)
        roots.extend(r for r in part.search_roots if r not in roots)
    return first.model_copy(
        update={"tests": tests, "referenced_files": referenced, "warnings": warnings, "search_roots": roots}
    )


def covered(parts: list[EvalSuite]) -> set[str]:
    return {t.id for part in parts for t in part.tests}
