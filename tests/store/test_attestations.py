"""Attestations of one run, proven against a signed checkpoint and checked with no store at all."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fixture_paths import AGENTV_FIXTURES
from log_rows import payload_at, record_span, rewrite_event, set_record
from sample_runs import append_run, drop_append_only_triggers, populate, run_batches

from evalstore import cli
from evalstore.replay.attest.attestation import build_attestation, verify_attestation
from evalstore.replay.attest.checkpoint import write_checkpoint
from evalstore.replay.attest.keys import SigningKey, create_key_file
from evalstore.replay.errors import AttestationError, AttestationFormatError
from evalstore.store import EventStore, make_engine

BASELINE = AGENTV_FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args))


@pytest.fixture
def key() -> SigningKey:
    return SigningKey.generate("ci.example.com/evals")


def test_an_attestation_proves_each_score_and_verdict_of_the_run(store: EventStore, key: SigningKey) -> None:
    populate(store)
    write_checkpoint(store, key)
    append_run(store, "run-later")  # events after the checkpoint do not matter to it
    doc = build_attestation(store, "run-a")
    statement = doc["statement"]
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    predicate = statement["predicate"]
    scored = {e.payload["test_id"]: e for e in store.read_stream("run-a", types=["test_scored"])}
    assert {r["test_id"]: (r["score"], r["seq"], r["event_hash"]) for r in predicate["results"]} == {
        t: (e.payload["score"], e.seq, e.hash) for t, e in scored.items()
    }
    assert all(r["verdicts"] for r in predicate["results"])
    size = predicate["log"]["size"]
    assert all(len(e["inclusion_proof"]) <= size.bit_length() for e in doc["events"])

    check = verify_attestation(json.loads(json.dumps(doc)), key.verifier)
    assert check.ok, check.problem
    assert (check.run_id, check.tests, check.size) == ("run-a", len(scored), size)


def _tampered(doc: dict, change) -> dict:  # type: ignore[no-untyped-def]
    copy = json.loads(json.dumps(doc))
    change(copy)
    return copy


def test_every_kind_of_tampering_fails_with_what_differs(store: EventStore, key: SigningKey) -> None:
    populate(store)
    write_checkpoint(store, key)
    doc = build_attestation(store, "run-a")
    first = doc["statement"]["predicate"]["results"][0]
    verdict = first["verdicts"][0]

    def claim_score(d: dict) -> None:
        d["statement"]["predicate"]["results"][0]["score"] = 1.0 - first["score"] + 0.25

    def claim_verdict(d: dict) -> None:
        d["statement"]["predicate"]["results"][0]["verdicts"][0]["verdict"] = (
            "pass" if verdict["verdict"] == "fail" else "fail"
        )

    def edit_event(d: dict) -> None:
        ev = next(e for e in d["events"] if e["seq"] == first["seq"])
        ev["payload"] = ev["payload"].replace('"passed":', '"passed" :')

    def forge_proof(d: dict) -> None:
        ev = d["events"][0]
        ev["inclusion_proof"][0] = "00" * 32

    def drop_event(d: dict) -> None:
        d["events"] = [e for e in d["events"] if e["seq"] != first["seq"]]

    def alter_checkpoint(d: dict) -> None:
        d["checkpoint"] = d["checkpoint"].replace("evalstore/", "evilstore/", 1)

    def snapshot(d: dict) -> None:
        d["statement"]["predicate"]["eval_snapshot_digest"] = "0" * 64

    results = doc["statement"]["predicate"]["results"]
    failing = next(i for i, r in enumerate(results) if not r["passed"])
    other = (failing + 1) % len(results)

    def omit_a_failure(d: dict) -> None:
        del d["statement"]["predicate"]["results"][failing]

    def list_another_result_in_its_place(d: dict) -> None:
        listed = d["statement"]["predicate"]["results"]
        listed[failing] = listed[other]

    # Issue 29 item 4: a result's verdict set is proven whole.
    def omit_its_failing_verdict(d: dict) -> None:
        listed = d["statement"]["predicate"]["results"][failing]["verdicts"]
        listed[:] = [v for v in listed if v["verdict"] != "fail"]

    def omit_all_its_verdicts(d: dict) -> None:
        d["statement"]["predicate"]["results"][failing]["verdicts"] = []

    def list_a_verdict_twice(d: dict) -> None:
        listed = d["statement"]["predicate"]["results"][failing]["verdicts"]
        listed[:] = [listed[0], listed[0]]

    def add_a_verdict_twice(d: dict) -> None:
        listed = d["statement"]["predicate"]["results"][failing]["verdicts"]
        listed.append(dict(listed[0]))

    def passed_as_a_number(d: dict) -> None:
        d["statement"]["predicate"]["results"][failing]["passed"] = 0

    cases = {
        claim_score: f"test {first['test_id']!r}: claimed score",
        claim_verdict: f"test {first['test_id']!r} grader {verdict['grader']!r}: claimed verdict",
        edit_event: f"event seq {first['seq']}: its content does not match its hash (altered)",
        forge_proof: f"event seq {doc['events'][0]['seq']}: its inclusion proof does not lead to the checkpoint's root",
        drop_event: f"test {first['test_id']!r}: event seq {first['seq']} with that hash is not among the proven events",
        alter_checkpoint: "checkpoint signature: signature by ci.example.com/evals does not match the text",
        snapshot: "predicate eval_snapshot_digest '000",
        omit_a_failure: f"the run completed with {len(results)} results",
        list_another_result_in_its_place: "a result is listed twice",
        omit_its_failing_verdict: f"test {results[failing]['test_id']!r}: the attestation leaves out grader 'judge': "
        "its score aggregates 2 verdicts (rubric, judge), it lists 1",
        omit_all_its_verdicts: f"test {results[failing]['test_id']!r}: the attestation leaves out grader 'rubric'",
        list_a_verdict_twice: f"test {results[failing]['test_id']!r} grader 'rubric': its verdict (event seq",
        add_a_verdict_twice: f"test {results[failing]['test_id']!r} grader 'rubric': its verdict (event seq",
        passed_as_a_number: f"test {results[failing]['test_id']!r}: claimed passed 0, its event says False",
    }
    assert any(v["verdict"] == "fail" for v in results[failing]["verdicts"])
    for change, problem in cases.items():
        check = verify_attestation(_tampered(doc, change), key.verifier)
        assert not check.ok and check.problem.startswith(problem), (change.__name__, check.problem)
    other = SigningKey.generate("ci.example.com/evals")
    assert verify_attestation(doc, other.verifier).problem.startswith("checkpoint signature: signed by")
    with pytest.raises(AttestationFormatError, match="statement is missing"):
        verify_attestation(_tampered(doc, lambda d: d.pop("statement")), key.verifier)


def test_an_attestation_of_another_shape_is_refused(store: EventStore, key: SigningKey) -> None:
    # Fields a reader does not check are claims nobody proved; another predicate type is another format.
    populate(store)
    write_checkpoint(store, key)
    doc = build_attestation(store, "run-a")
    shapes = {
        "has a field it cannot have: note": lambda d: d.update(note="all green"),
        "predicate has a field it cannot have: reviewed": lambda d: d["statement"]["predicate"].update(reviewed=True),
        "verdicts[0] has a field it cannot have: weight": lambda d: d["statement"]["predicate"]["results"][0][
            "verdicts"
        ][0].update(weight=9),
        "events[0] has a field it cannot have: extra": lambda d: d["events"][0].update(extra=1),
        "predicate.run_completed is missing": lambda d: d["statement"]["predicate"].pop("run_completed"),
        "with predicateType https://evalstore.dev/attestation/run-results/v1": lambda d: d["statement"].update(
            predicateType="https://evalstore.dev/attestation/run-results/v2"
        ),
    }
    for problem, change in shapes.items():
        with pytest.raises(AttestationFormatError, match=re.escape(problem)):
            verify_attestation(_tampered(doc, change), key.verifier)
    assert verify_attestation(doc, key.verifier).ok


def test_duplicate_keys_and_deep_nesting_are_refused_by_the_cli(
    store: EventStore, key: SigningKey, tmp_path: Path
) -> None:
    populate(store)
    write_checkpoint(store, key)
    doc = build_attestation(store, "run-a")
    pub = tmp_path / "key.pub"
    pub.write_text(key.verifier.encoded() + "\n")
    text = json.dumps(doc)
    passed = '"passed": false'
    assert passed in text
    cases = {
        "duplicate.json": (text.replace(passed, '"passed": true, ' + passed, 1), "the key 'passed' is given twice"),
        "deep.json": ("[" * 100_000 + "]" * 100_000, "nested too deep to read"),
        "noise.json": (None, "not JSON"),
    }
    for name, (content, problem) in cases.items():
        path = tmp_path / name
        if content is None:
            path.write_bytes(random.Random(29).randbytes(4000))
        else:
            path.write_text(content)
        result = _cli("verify-attestation", str(path), "--pubkey", str(pub))
        assert result.exit_code == 2, (name, result.output)
        assert problem in result.stderr and len(result.stderr.splitlines()) == 1, (name, result.stderr)


def test_a_score_that_does_not_name_its_graders_cannot_be_proven_complete(store: EventStore, key: SigningKey) -> None:
    # Results recorded before test_scored named its graders: their verdict sets cannot be proven whole.
    from evalstore.store import NewEvent
    from evalstore.store.events import RunCompleted, RunStarted, TestScored, VerdictRecorded

    store.append(
        "run-old",
        [
            NewEvent(RunStarted(run_id="run-old", kind="recorded", threshold=0.5, tool_version="0.1")),
            NewEvent(VerdictRecorded(test_id="t", grader="g", grader_type="contains", score=1.0, verdict="pass")),
            NewEvent(TestScored(test_id="t", score=1.0, passed=True, status="ok", threshold=0.5)),
            NewEvent(RunCompleted(tests=1, passed=1, failed=0, errors=0)),
        ],
    )
    write_checkpoint(store, key)
    check = verify_attestation(build_attestation(store, "run-old"), key.verifier)
    assert check.problem is not None and check.problem.endswith("so its verdicts cannot be proven complete")


def test_attest_refuses_a_run_whose_events_were_altered_or_that_is_not_complete(
    store: EventStore, key: SigningKey
) -> None:
    """An event edited in the database (its record's stored hash left as it was) is not signed off, and a
    run that has no run_completed yet has no count a reader could check the results against."""
    populate(store)
    write_checkpoint(store, key)
    (seq,) = [e.seq for e in store.read_stream("run-a", types=["test_scored"], limit=1)]
    drop_append_only_triggers(store.engine)
    rewrite_event(store.engine, seq, payload=payload_at(store.engine, seq) + " ")
    with pytest.raises(AttestationError, match=f"event seq {seq} of run run-a does not match its hash"):
        build_attestation(store, "run-a")
    version = 0
    for events, blobs in run_batches("run-open")[:-1]:  # the run_completed append left out
        store.append("run-open", events, expected_version=version, blobs=blobs)
        version += len(events)
    with pytest.raises(AttestationError, match="run run-open is not complete"):
        build_attestation(store, "run-open")


def test_attesting_needs_a_checkpoint_that_covers_the_run_and_still_matches(store: EventStore, key: SigningKey) -> None:
    populate(store)
    with pytest.raises(AttestationError, match=r"no checkpoint covers run run-a .*`evalstore checkpoint`"):
        build_attestation(store, "run-a")
    write_checkpoint(store, key)
    append_run(store, "run-later")
    with pytest.raises(AttestationError, match="no checkpoint covers run run-later"):
        build_attestation(store, "run-later")
    drop_append_only_triggers(store.engine)
    # A stored hash changed in a record of another run (run-b's first test): run-a's own events still match
    # their hashes, but the log is no longer the one the checkpoint signed.
    first, last = record_span(store.engine, 25)
    assert (first, last) == (25, 31)
    set_record(store.engine, first, hash=b"\xee" * 32)
    with pytest.raises(AttestationError, match="the log no longer matches its checkpoint"):
        build_attestation(store, "run-a")


def test_import_writes_a_checkpoint_and_the_attestation_verifies_offline(sqlite_url: str, tmp_path: Path) -> None:
    key_file, cp, att = tmp_path / "k.key", tmp_path / "cp.txt", tmp_path / "att.json"
    create_key_file(key_file, "ci")
    pub = tmp_path / "k.pub"
    pub.write_text(_cli("keys", "show", "--key", str(key_file)).stdout)
    imported = _cli(
        "--db", sqlite_url, "import", str(BASELINE), "--json", "--checkpoint", str(cp), "--key", str(key_file)
    )
    assert imported.exit_code == 0, imported.output
    run_id = json.loads(imported.stdout)["run_id"]
    assert "checkpoint of " in imported.stderr and cp.read_text().startswith("evalstore/")
    assert _cli("--db", sqlite_url, "verify", "--checkpoint", str(cp), "--pubkey", str(pub)).exit_code == 0

    made = _cli("--db", sqlite_url, "attest", run_id[:8], "-o", str(att))
    assert made.exit_code == 0, made.output
    (tmp_path / "store.db").rename(tmp_path / "elsewhere.db")  # offline: no store needed
    checked = _cli("verify-attestation", str(att), "--pubkey", str(pub))
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith(f"ok: run {run_id}: ")
    doc = json.loads(att.read_text())
    doc["statement"]["predicate"]["results"][0]["passed"] = not doc["statement"]["predicate"]["results"][0]["passed"]
    att.write_text(json.dumps(doc))
    failed = _cli("verify-attestation", str(att), "--pubkey", str(pub), "--json")
    assert failed.exit_code == 1 and "claimed passed" in json.loads(failed.stdout)["problem"]
    att.write_text("{not json")
    bad = _cli("verify-attestation", str(att), "--pubkey", str(pub))
    assert bad.exit_code == 2 and bad.stderr.startswith(f"Error: {att}: not JSON")


@pytest.mark.parametrize("log", ["capitals.eval", "arithmetic.eval"])
def test_an_imported_inspect_log_is_attested_with_every_verdict_proven(
    sqlite_url: str, tmp_path: Path, key: SigningKey, log: str
) -> None:
    # Its test_scored events name their scorers (graders), so each result's verdict set is proven whole.
    from fixture_paths import FIXTURES_DIR

    imported = _cli("--db", sqlite_url, "import", str(FIXTURES_DIR / "inspect" / "logs" / log), "--json")
    assert imported.exit_code == 0, imported.output
    store = EventStore(make_engine(sqlite_url))
    write_checkpoint(store, key)
    run_id = json.loads(imported.stdout)["run_id"]
    check = verify_attestation(json.loads(json.dumps(build_attestation(store, run_id))), key.verifier)
    assert check.ok, check.problem
    assert check.verdicts >= check.tests > 0
    store.close()


def test_a_missing_key_stops_import_before_anything_is_written(sqlite_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "none.key"
    result = _cli(
        "--db", sqlite_url, "import", str(BASELINE), "--checkpoint", str(tmp_path / "cp.txt"), "--key", str(missing)
    )
    assert result.exit_code == 2
    assert result.stderr == f"Error: {missing}: no signing key there; create one with `evalstore keys init`\n"
    listed = _cli("--db", sqlite_url, "runs", "--json")  # a read never creates the store the import did not
    assert listed.stdout.strip() == "[]" or "no store at" in listed.stderr


def test_replay_writes_a_checkpoint_that_covers_the_replay(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the quickstart's agent works under ./.evalstore/workspaces
    monkeypatch.delenv("EVALSTORE_JUDGE_BASE_URL", raising=False)
    assert _cli("--db", sqlite_url, "quickstart", "--json").exit_code == 0
    key_file, cp = tmp_path / "k.key", tmp_path / "cp.txt"
    create_key_file(key_file, "ci")
    pub = tmp_path / "k.pub"
    pub.write_text(_cli("keys", "show", "--key", str(key_file)).stdout)
    replayed = _cli("--db", sqlite_url, "replay", "last", "--json", "--checkpoint", str(cp), "--key", str(key_file))
    assert replayed.exit_code in (0, 1), replayed.output  # 1: a test below the threshold; the checkpoint is written
    replay_id = json.loads(replayed.stdout)["run_id"]
    assert cp.is_file() and "checkpoint of " in replayed.stderr
    assert _cli("--db", sqlite_url, "verify", "--checkpoint", str(cp), "--pubkey", str(pub)).exit_code == 0
    made = _cli("--db", sqlite_url, "attest", replay_id, "-o", str(tmp_path / "att.json"))
    assert made.exit_code == 0, made.output  # the checkpoint covers every event of the replay
    assert _cli("verify-attestation", str(tmp_path / "att.json"), "--pubkey", str(pub)).exit_code == 0
