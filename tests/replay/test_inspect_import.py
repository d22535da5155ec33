"""Inspect AI logs in: every sample and epoch a result, every score a verdict as Inspect's own
``value_to_float`` reads it, a score's edits as events with their author, errors and invalidations kept.

The logs are real: tests/fixtures/inspect/make_logs.py made them with inspect-ai 0.3.285 (see its README).
Expected values are read from the logs here, with inspect_ai, not written down.
"""

from __future__ import annotations

import json
import shutil
import sys
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR
from inspect_values import expected_verdicts

from evalstore import cli as cli_package
from evalstore.replay.inspect.importing import SAMPLE_FORMAT, import_log, import_logs, sample_record
from evalstore.replay.material import load_run
from evalstore.store import EventStore, schema
from evalstore.store.events import ScoreEdited

inspect_log = pytest.importorskip("inspect_ai.log")

LOGS = FIXTURES_DIR / "inspect" / "logs"
ALL_LOGS = sorted(LOGS.iterdir())


@pytest.mark.parametrize("log", ALL_LOGS, ids=[p.name for p in ALL_LOGS])
def test_every_scorer_value_of_every_sample_is_a_verdict(store: EventStore, log: Path) -> None:
    outcome = import_log(store, log)
    run = load_run(store, outcome.run_id)
    expected = expected_verdicts(log)
    assert outcome.tests == len(expected) > 0
    got = {
        (key[0], key[2]): {name: v.score if v.verdict != "skip" else None for name, (_, v) in m.verdicts.items()}
        for key, m in run.tests.items()
    }
    assert got == expected
    assert {key[1] for key in run.tests} == {inspect_log.read_eval_log(log, header_only=True).eval.model}


def test_a_dict_valued_score_is_one_verdict_per_key(store: EventStore) -> None:
    run = load_run(store, import_log(store, LOGS / "capitals.eval").run_id)
    test = run.tests[("2", "openai-api/local/agent", 1)]
    assert set(test.verdicts) == {"model_graded_qa", "checks/exact", "checks/length_ok"}
    exact = test.verdicts["checks/exact"][1]
    assert (exact.score, exact.details["value"], exact.details["key"]) == (0.0, "I", "exact")
    assert test.verdicts["checks/length_ok"][1].score == 1.0  # True, as value_to_float reads it


def test_the_sample_is_case_transcript_and_score(store: EventStore) -> None:
    run = load_run(store, import_log(store, LOGS / "capitals.eval").run_id)
    test = run.tests[("2", "openai-api/local/agent", 1)]
    assert test.case is not None and test.transcript is not None and test.scored is not None
    case, transcript = test.case[1], test.transcript[1]
    assert case.input == [{"role": "user", "content": "Which city is the capital of Japan?"}]
    assert case.expected_output == "Tokyo"
    assert transcript.output_text == "The capital of Japan is Tokyo."
    assert transcript.token_usage == {"input": 100, "output": 20}
    messages = json.loads(store.get_blob(transcript.messages_sha256 or ""))
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == "The capital of Japan is Tokyo."
    # The sample as Inspect wrote it, and its attachments (model_graded_qa's grading prompt), are blobs.
    record = sample_record(store.get_blob(transcript.source_record_sha256 or ""))
    assert record["id"] == 2 and "attachments" not in record
    assert transcript.attachments
    for attachment in transcript.attachments:
        assert store.get_blob(attachment["sha256"])
    # The test's score is the mean of its verdicts, as evalstore scores any test.
    assert test.scored[1].score == pytest.approx((1.0 + 0.0 + 1.0) / 3)


def test_an_errored_sample_is_an_execution_error_with_its_message_and_retries(store: EventStore) -> None:
    run = load_run(store, import_log(store, LOGS / "arithmetic.eval").run_id)
    boom = run.tests[("boom", "openai-api/local/agent", 1)]
    assert boom.transcript is not None and boom.scored is not None
    assert boom.transcript[1].status == "error"
    assert "fails on sample boom" in (boom.transcript[1].error or "")
    assert boom.scored[1].status == "execution_error" and not boom.scored[1].passed
    flaky = run.tests[("flaky", "openai-api/local/agent", 1)]
    assert flaky.scored is not None and flaky.scored[1].row_fields["error_retries"] == "1"


def test_score_edits_are_events_in_order_with_their_provenance(store: EventStore) -> None:
    run = load_run(store, import_log(store, LOGS / "arithmetic.eval").run_id)
    div = run.tests[("div", "openai-api/local/agent", 1)]
    edits = [e for _, e in div.edits]
    assert [(e.grader, e.edit, e.author, e.previous_value, e.value) for e in edits] == [
        ("includes", 1, "alice", "C", "I"),
        ("includes", 2, "bob", "I", "C"),
    ]
    assert edits[0].reason == "integers only" and edits[0].edited_at == "2026-11-01T12:00:00.000000+00:00"
    assert div.verdicts["includes"][1].score == 1.0  # the score as it stands after the edits
    added = [e for _, e in run.tests[("sub", "openai-api/local/agent", 2)].edits]
    assert [(e.grader, e.author, e.previous_value, e.value) for e in added] == [("review", "carol", None, 0.75)]
    # In the log, each edit comes before the verdict it led to.
    stream = [s for s in store.read_stream(run.run_id) if getattr(s.event, "test_id", None) == "div"]
    types = [s.type for s in stream if getattr(s.event, "attempt", None) == 1]
    assert types.index("score_edited") < types.index("verdict_recorded")
    assert all(isinstance(s.event, ScoreEdited) for s in stream if s.type == "score_edited")


def test_an_invalidated_sample_is_marked(store: EventStore) -> None:
    run = load_run(store, import_log(store, LOGS / "arithmetic.eval").run_id)
    marked = {key for key, m in run.tests.items() if m.scored and "invalidated_by" in m.scored[1].row_fields}
    assert marked == {("wrong", "openai-api/local/agent", 2)}
    fields = run.tests[("wrong", "openai-api/local/agent", 2)].scored[1].row_fields  # type: ignore[index]
    assert fields["invalidated_by"] == "alice"


def test_the_run_keeps_the_eval_spec_and_the_log_header(store: EventStore) -> None:
    run = load_run(store, import_log(store, LOGS / "arithmetic.eval").run_id)
    started = run.started
    assert (started.kind, started.suite, started.target_name, started.source_format) == (
        "imported",
        "arithmetic",
        "openai-api/local/agent",
        "inspect-eval",
    )
    assert started.target is not None
    assert started.target["task_args"] == {"style": "terse"}
    assert started.target["packages"] == {"inspect_ai": "0.3.285"}
    assert started.target["config"]["epochs"] == 2
    (header,) = started.eval_snapshot
    assert header.role == "inspect_header"
    assert json.loads(store.get_blob(header.sha256 or ""))["eval"]["task"] == "arithmetic"


def test_the_json_log_imports_as_the_eval_log_does(sqlite_store: EventStore) -> None:
    a = load_run(sqlite_store, import_log(sqlite_store, LOGS / "capitals.eval").run_id)
    b = load_run(sqlite_store, import_log(sqlite_store, LOGS / "capitals.json").run_id)
    assert a.run_id != b.run_id and b.started.source_format == "inspect-json"
    scores = [{k: {g: v.score for g, (_, v) in m.verdicts.items()} for k, m in r.tests.items()} for r in (a, b)]
    assert scores[0] == scores[1]


def test_importing_again_is_a_no_op_and_a_folder_is_one_run_per_log(sqlite_store: EventStore) -> None:
    first = import_logs(sqlite_store, LOGS)
    assert len(first) == len(ALL_LOGS) == len({o.run_id for o in first})
    events = sum(1 for _ in sqlite_store.read_stream(first[0].run_id))
    again = import_logs(sqlite_store, LOGS / "arithmetic.eval")
    assert again[0].already_imported and again[0].run_id == first[0].run_id
    assert sum(1 for _ in sqlite_store.read_stream(first[0].run_id)) == events


def test_samples_are_read_one_at_a_time(sqlite_store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole log is never read: only its header, then its samples as a stream."""
    real = inspect_log.read_eval_log

    def header_only(path, header_only=False, **kwargs):  # type: ignore[no-untyped-def]
        assert header_only, "the import read the whole log"
        return real(path, header_only=True, **kwargs)

    monkeypatch.setattr(inspect_log, "read_eval_log", header_only)
    assert import_log(sqlite_store, LOGS / "choice.eval").tests == 9


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def test_cli_import_and_audit_show_who_edited_a_score(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    result = _cli(db, "import", str(LOGS / "arithmetic.eval"), "--json")
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.output)["run_id"]
    audit = _cli(db, "audit", run_id, "div")
    assert audit.exit_code == 0, audit.output
    assert (
        'edit 1 of score includes by alice at 2026-11-01T12:00:00.000000+00:00: "C" -> "I" — integers only'
        in audit.output
    )
    assert "edit 2 of score includes by bob" in audit.output


def test_a_file_that_is_not_a_log_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "broken.eval"
    bad.write_bytes(b"not a zip file")
    db = str(tmp_path / "s.db")
    result = _cli(db, "import", str(bad))
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {bad}: not an Inspect AI log") and result.output.count("\n") == 1
    truncated = tmp_path / "cut.eval"
    data = (LOGS / "choice.eval").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    assert _cli(db, "import", str(truncated)).exit_code == 2
    assert not Path(db).exists()  # refused before a store was made


def test_without_inspect_ai_the_import_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import fails as if not installed
    log = tmp_path / "copy.eval"
    shutil.copy(LOGS / "choice.eval", log)
    result = _cli(str(tmp_path / "s.db"), "import", str(log))
    assert result.exit_code == 2
    assert result.output == "Error: Inspect AI logs need the inspect_ai package: pip install 'evalstore[inspect]'\n"
    assert not (tmp_path / "s.db").exists()


def test_samples_a_log_lacks_are_left_out(sqlite_store: EventStore, tmp_path: Path) -> None:
    """A log missing some samples (an eval cancelled part way): the others are imported, as Inspect reads them."""
    import zipfile

    import zipfile_zstd  # noqa: F401 (Inspect's .eval members are zstd-compressed; this teaches zipfile)

    cut = tmp_path / "cut.eval"
    with zipfile.ZipFile(LOGS / "arithmetic.eval") as src, zipfile.ZipFile(cut, "w") as dst:
        for info in src.infolist():
            if info.filename != "samples/mul_epoch_2.json":
                dst.writestr(info.filename, src.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)
    imported = import_log(sqlite_store, cut)
    # said, not taken silently (the header says the eval succeeded)
    assert imported.warnings == [
        f"{cut}: 1 of the 14 samples the log names are not in it (the eval's status: success); "
        "the 13 it holds were imported"
    ]
    run = load_run(sqlite_store, imported.run_id)
    assert len(run.tests) == 13 and ("mul", "openai-api/local/agent", 2) not in run.tests
    assert ("mul", "openai-api/local/agent", 1) in run.tests


def test_a_logs_samples_are_stored_against_one_another(store: EventStore) -> None:
    """Samples of one log share most of their bytes (events, spans, prompts): each is stored opening with
    the same bytes (the log's header digest), so the store compresses it against an earlier sample."""
    from sqlalchemy import select

    run = load_run(store, import_log(store, LOGS / "arithmetic.eval").run_id)
    header = next(s.sha256 for s in run.started.eval_snapshot if s.role == "inspect_header")
    digests = [m.transcript[1].source_record_sha256 for m in run.tests.values() if m.transcript]
    stored = [json.loads(store.get_blob(d or "")) for d in digests]
    assert all(s["format"] == SAMPLE_FORMAT and s["log"] == header for s in stored)
    assert sorted((s["sample"]["id"], s["sample"]["epoch"]) for s in stored) == sorted((k[0], k[2]) for k in run.tests)
    b = schema.blobs
    with store.engine.connect() as conn:
        rows = conn.execute(select(b.c.sha256, b.c.dictionary, b.c.size, b.c.data).where(b.c.sha256.in_(digests))).all()
    against = [r for r in rows if r.dictionary in digests]
    assert len(against) == len(digests) - 1  # all but the first, stored against it
    assert sum(len(r.data) for r in against) < 0.75 * sum(
        len(zlib.compress(store.get_blob(r.sha256), 6)) for r in against
    )


def test_a_sample_stored_bare_by_an_earlier_import_reads_as_it_is() -> None:
    assert sample_record(json.dumps({"id": 1, "epoch": 2}).encode()) == {"id": 1, "epoch": 2}
