"""A test's case (its question: the input messages, criteria, expected output and metadata) as every
reader shows it, whatever made the run.

A run evalstore recorded, and a replay, keep each result's case as a ``test_case_recorded`` event built
from the eval (:func:`evalstore.replay.material.case_event`). AgentV's result rows mostly do not carry
the case, so an import of them records none; when the import kept the eval file (``--eval``, or the eval
its results name), the case is built from that snapshot as a replay of the run builds it
(:func:`~evalstore.replay.evalfile.snapshot.snapshot_eval`, then ``case_event``), from the recorded bytes
only (a replay may take a file the snapshot lacks from the disk; a reader never does).
:class:`RunCases` is that one rule, for ``label --next``, the viewer's test page, ``export --format
json`` and ``assert --run``: the recorded case, else the eval snapshot's, else none and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from evalstore.replay.analysis.views import ResultKey, run_started, transcript_run_id
from evalstore.replay.errors import ReplayError
from evalstore.store.errors import StoreError

if TYPE_CHECKING:
    from evalstore.replay.evalfile.specs import EvalTest
    from evalstore.store import (
        EventStore,  # an export reads recorded cases as payloads: the eval parser loads on a missing case only
    )
    from evalstore.store.events import RunStarted, TestCaseRecorded

CaseOrigin = Literal["recorded", "eval_snapshot"]

C = TypeVar("C", bound="TestCaseRecorded | Mapping[str, Any]")

NOT_CARRIED = "no question recorded: the result did not carry its test case"


@dataclass(frozen=True)
class FoundCase(Generic[C]):
    """A result's case and where it came from, or why there is none."""

    case: C | TestCaseRecorded | None
    """The recorded case as the reader read it (an event, or its payload fields), the one built from the
    eval snapshot (an event), or None."""
    origin: CaseOrigin | None
    """``recorded``: the result's own case event (or the one of the run holding its transcript);
    ``eval_snapshot``: none was recorded, and this is the test as the run's eval snapshot has it (what a
    replay of the run would grade against); None: no case."""
    missing: str | None = None
    """Why there is no case, to be shown in its place (None when there is one)."""


class RunCases:
    """The cases of one run's results. ``runs``: the run, then the run holding its transcripts (a replay's
    origin), whose recorded cases the reader looked at; the first of them with an eval snapshot is the
    one a missing case is built from, its files read with ``read_blob`` (the store's ``get_blob``). The
    snapshot is parsed once, on the first missing case."""

    def __init__(self, runs: Sequence[RunStarted], read_blob: Callable[[str], bytes]) -> None:
        self._read_blob = read_blob
        self._runs = list({r.run_id: r for r in runs}.values())
        self._tests: dict[str, EvalTest] | None = None
        self._problem: str | None = None
        self._built: dict[str, TestCaseRecorded] = {}

    @classmethod
    def of(cls, store: EventStore, run_id: str) -> RunCases:
        """The cases of ``run_id``'s results: the run, then (a replay) the run holding its transcripts."""
        started = run_started(store, run_id)
        origin = transcript_run_id(store, started)
        return cls([started] if origin == run_id else [started, run_started(store, origin)], store.get_blob)

    def find(self, key: ResultKey, recorded: C | None) -> FoundCase[C]:
        """The case of result ``key`` (test id, target or "", attempt): ``recorded`` (what the reader found
        in the run's events, or None), else the one the eval snapshot gives, else None with the reason."""
        if recorded is not None:
            return FoundCase(recorded, "recorded")
        test_id, target, attempt = key
        tests = self._snapshot_tests()
        if tests is None:
            return FoundCase(None, None, self._problem)
        base = self._built.get(test_id)
        if base is None:
            test = tests.get(test_id)
            if test is None:
                return FoundCase(None, None, f"{NOT_CARRIED}, and the run's eval snapshot has no test {test_id!r}")
            from evalstore.replay.material import case_event

            base = self._built[test_id] = case_event(test, None)
        return FoundCase(base.model_copy(update={"target": target or None, "attempt": attempt}), "eval_snapshot")

    def graders(self, test_id: str) -> list[Any] | None:
        """Test ``test_id``'s graders (``EvalTest.graders``: their names, ``required`` and ``min_score``) as the
        run's eval snapshot has them; None when it has no such test or there is no snapshot to read."""
        tests = self._snapshot_tests()
        test = tests.get(test_id) if tests is not None else None
        return list(test.graders) if test is not None else None

    def _snapshot_tests(self) -> dict[str, EvalTest] | None:
        """The tests of the first eval snapshot among the runs, by id; None (and ``_problem`` says why)
        when there is none or it cannot be read."""
        if self._tests is not None or self._problem is not None:
            return self._tests
        for started in self._runs:
            if not any(s.role == "eval" and s.sha256 for s in started.eval_snapshot):
                continue  # no eval to parse (an import without one): the eval-file modules stay unloaded
            from evalstore.replay.evalfile.snapshot import snapshot_eval

            try:
                # Only the recorded bytes: a reader never takes a file from the disk (a replay may).
                suite = snapshot_eval(started.eval_snapshot, self._read_blob)
            except (ReplayError, StoreError) as exc:
                self._problem = f"{NOT_CARRIED}, and the eval snapshot of run {started.run_id} cannot be read: {exc}"
                return None
            if suite is not None:
                self._tests = {t.id: t for t in suite.tests}  # as a replay finds a result's test
                return self._tests
        run_id = self._runs[0].run_id if self._runs else "RUN"
        self._problem = (
            f"{NOT_CARRIED}, and the run kept no eval file to build it from; "
            f"`evalstore replay {run_id} --eval EVAL.yaml` records each test's case with its regrade"
        )
        return None
