"""evalstore: record agent eval runs as immutable events, regrade them without calling the agent,
compare regrades with honest statistics, and audit any score down to its bytes.

The public API, as ``docs/usage.md`` shows it::

    import evalstore

    store = evalstore.EventStore.open("sqlite:///.evalstore/evalstore.db")
    run = evalstore.record_run(store, "evals/report.eval.yaml", evalstore.RunOptions(target="my-agent"))
    replay = evalstore.replay_run(store, run.run_id, evalstore.ReplayOptions(eval_path="evals/v2.eval.yaml"))
    diff = evalstore.compare(evalstore.load_results(store, run.run_id),
                             evalstore.load_results(store, replay.run_id))

Names are imported when first used, so ``import evalstore`` (and ``evalstore --version``) stays cheap.
The packages underneath: ``evalstore.store`` (the event log), ``evalstore.replay`` (the domain),
``evalstore.cli`` (the command line), ``evalstore.migrations`` (Alembic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstore.lazy import lazy_getattr

# The one place the version is written: pyproject.toml reads it from here ([tool.setuptools.dynamic]),
# and reading a literal costs nothing at start-up (importlib.metadata would).
__version__ = "0.1.0"

# name -> module that defines it; one table, so __all__, __getattr__ and the docs cannot disagree
_EXPORTS: dict[str, str] = {
    # the store
    "EventStore": "evalstore.store",
    "make_engine": "evalstore.store",
    "StoreError": "evalstore.store",
    # eval files
    "load_eval": "evalstore.replay.evalfile.parser",
    # grading without writing anything
    "grade_transcript": "evalstore.replay.api",
    "grade_stored": "evalstore.replay.api",
    # record, import, replay
    "record_run": "evalstore.replay.record",
    "RunOptions": "evalstore.replay.record",
    "import_results": "evalstore.replay.agentv.importing",
    "replay_run": "evalstore.replay.regrade",
    "ReplayOptions": "evalstore.replay.regrade",
    # compare, audit, export
    "load_results": "evalstore.replay.material",
    "load_scores": "evalstore.replay.material",
    "compare": "evalstore.replay.analysis.compare",
    "audit_test": "evalstore.replay.analysis.audit",
    "export_run": "evalstore.replay.agentv.export",
    "ReplayError": "evalstore.replay.errors",
}

__all__ = [  # a literal, so tools can read it; tests/test_packaging.py checks it equals _EXPORTS
    "EventStore",
    "ReplayError",
    "ReplayOptions",
    "RunOptions",
    "StoreError",
    "__version__",
    "audit_test",
    "compare",
    "export_run",
    "grade_stored",
    "grade_transcript",
    "import_results",
    "load_eval",
    "load_results",
    "load_scores",
    "make_engine",
    "record_run",
    "replay_run",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from evalstore.replay.agentv.export import export_run
    from evalstore.replay.agentv.importing import import_results
    from evalstore.replay.analysis.audit import audit_test
    from evalstore.replay.analysis.compare import compare
    from evalstore.replay.api import grade_stored, grade_transcript
    from evalstore.replay.errors import ReplayError
    from evalstore.replay.evalfile.parser import load_eval
    from evalstore.replay.material import load_results, load_scores
    from evalstore.replay.record import RunOptions, record_run
    from evalstore.replay.regrade import ReplayOptions, replay_run
    from evalstore.store import EventStore, StoreError, make_engine
