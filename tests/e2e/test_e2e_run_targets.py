"""``evalstore run`` end to end with an ``openai`` target on the scripted server, with ``--workers``
running tests at once, and the notes it prints on stderr.

Every run is the installed console script in a real subprocess against a real SQLite store.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from e2e_helpers import REPO, audit, evalstore, ok_json
from judge_server import JudgeServer, Reply, by_content
from test_e2e_run_variants import everything_stored

from evalstore.store import EventStore, make_engine

PY = sys.executable
CHAT_KEY_ENV = "E2E_CHAT_TARGET_KEY"
CHAT_KEY = "sk-e2e-CHATTARGET-5b1e0c9d77aa"


def write_project(root: Path, targets: str, tests: list[tuple[str, str, str]], target: str) -> Path:
    """``.agentv/targets.yaml`` and an eval whose tests (id, question, text the answer must contain) are
    graded by one deterministic ``contains`` assertion each."""
    (root / ".agentv").mkdir(parents=True)
    (root / ".agentv" / "targets.yaml").write_text(targets, encoding="utf-8")
    cases = "".join(
        f"  - id: {test_id}\n    input: {json.dumps(question)}\n    assertions:\n"
        f"      - {{name: right-answer, type: contains, value: {json.dumps(needle)}}}\n"
        for test_id, question, needle in tests
    )
    eval_file = root / "evals" / "suite.eval.yaml"
    eval_file.parent.mkdir()
    eval_file.write_text(f"name: targets\nexecution:\n  target: {target}\ntests:\n{cases}", encoding="utf-8")
    return eval_file


def stored_transcripts(db_file: Path) -> dict[str, tuple[dict, list]]:
    """Per test: the ``transcript_recorded`` payload and its decoded messages blob."""
    store = EventStore(make_engine(f"sqlite:///{db_file}"))
    out = {}
    for event in store.read_all():
        if event.type == "transcript_recorded":
            payload = json.loads(event.payload_json)
            out[payload["test_id"]] = (payload, json.loads(store.get_blob(payload["messages_sha256"])))
    return out


# -- an openai target -------------------------------------------------------------------------------


def test_an_openai_target_answer_is_recorded_graded_and_its_key_never_stored(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    judge_server.respond_with(
        by_content(
            [("6 x 7", Reply(content="The answer is 42.")), ("capital of France", Reply(content="It is Lyon."))],
            default="I do not know.",
        )
    )
    targets = textwrap.dedent(f"""\
        targets:
          - name: chat
            provider: openai
            base_url: {judge_server.base_url}
            model: chat-model-1
            api_key: ${{{{ {CHAT_KEY_ENV} }}}}
            temperature: 0
        """)
    eval_file = write_project(
        tmp_path / "proj",
        targets,
        [("math", "What is 6 x 7?", "42"), ("geo", "What is the capital of France?", "Paris")],
        "chat",
    )
    db_file = tmp_path / "store.db"

    result = evalstore(
        f"sqlite:///{db_file}",
        "run",
        str(eval_file),
        "--json",
        "--workdir",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        env={CHAT_KEY_ENV: CHAT_KEY},
    )

    out = ok_json(result, 1)  # exit 1: the wrong answer fails its assertion
    rows = {r["test_id"]: r for r in out["results"]}
    assert {t: (r["status"], r["passed"], r["graders"]) for t, r in rows.items()} == {
        "math": ("ok", True, {"right-answer": 1.0}),
        "geo": ("quality_failure", False, {"right-answer": 0.0}),
    }
    # What the endpoint received: the model, the question, the key (resolved only for the request).
    sent = {r.user: r for r in judge_server.requests}
    assert set(sent) == {"What is 6 x 7?", "What is the capital of France?"}
    assert all(
        r.body["model"] == "chat-model-1" and r.headers["authorization"] == f"Bearer {CHAT_KEY}" for r in sent.values()
    )

    transcripts = stored_transcripts(db_file)
    payload, messages = transcripts["math"]
    # Payloads leave out fields at their default: no status means ok, no error.
    assert payload["output_text"] == "The answer is 42." and "status" not in payload and "error" not in payload
    assert messages[-1] == {"role": "assistant", "content": "The answer is 42."}
    assert messages[0]["role"] == "user" and "6 x 7" in json.dumps(messages[0])
    assert payload["token_usage"] == {"input": 100, "output": 20}  # the server's usage, in AgentV's shape
    assert transcripts["geo"][0]["output_text"] == "It is Lyon."

    run = audit(f"sqlite:///{db_file}", out["run_id"], "math")["run"]
    assert run["target"]["api_key"] == f"${{{{ {CHAT_KEY_ENV} }}}}"
    stored = everything_stored(db_file)
    assert CHAT_KEY_ENV.encode() in stored and CHAT_KEY.encode() not in stored
    assert CHAT_KEY not in result.stdout + result.stderr


# -- --workers -------------------------------------------------------------------------------------

SLEEPER = textwrap.dedent("""\
    import json, sys, time
    test_id, log = sys.argv[1], sys.argv[2]
    start = time.time()
    time.sleep(1.5)
    end = time.time()
    with open(log, "a", encoding="utf-8") as handle:  # one short append per line: no torn lines
        handle.write(json.dumps({"test": test_id, "start": start, "end": end}) + "\\n")
    print("done " + test_id)
""")


def run_sleepers(tmp_path: Path, workers: int | None, suite_workers: int | None = None) -> list[tuple[float, float]]:
    """Four tests whose agent sleeps 1.5 s; the (start, end) each agent logged, in start order. ``workers``:
    ``--workers`` (None: not given); ``suite_workers``: the eval's ``execution.workers``."""
    root = tmp_path / f"workers-{workers}-{suite_workers}"
    root.mkdir()
    agent, log = root / "sleeper.py", root / "intervals.jsonl"
    agent.write_text(SLEEPER, encoding="utf-8")
    targets = textwrap.dedent(f"""\
        targets:
          - name: sleeper
            provider: cli
            command: [{json.dumps(PY)}, {json.dumps(str(agent))}, "{{EVAL_ID}}", {json.dumps(str(log))}]
        """)
    tests = [(f"t{i}", f"task {i}", f"done t{i}") for i in range(4)]
    eval_file = write_project(root / "proj", targets, tests, "sleeper")
    if suite_workers is not None:
        text = eval_file.read_text(encoding="utf-8")
        eval_file.write_text(text.replace("  target: sleeper\n", f"  target: sleeper\n  workers: {suite_workers}\n"))
    flags = ["--workers", str(workers)] if workers is not None else []
    out = ok_json(
        evalstore(
            f"sqlite:///{root / 'store.db'}",
            "run",
            str(eval_file),
            "--json",
            *flags,
            "--workdir",
            str(root / "ws"),
            cwd=root,
        )
    )
    assert [(r["test_id"], r["passed"]) for r in out["results"]] == [(t, True) for t, _, _ in tests]
    logged = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert sorted(entry["test"] for entry in logged) == [t for t, _, _ in tests]
    return sorted((entry["start"], entry["end"]) for entry in logged)


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end and a start at the same instant do not overlap)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


def test_workers_run_tests_at_once_and_one_worker_runs_them_one_after_another(tmp_path: Path) -> None:
    # Judged by what the agents logged, not by wall-clock totals, so a loaded machine cannot flip it.
    parallel = run_sleepers(tmp_path, workers=4)
    assert peak_overlap(parallel) == 4, parallel
    assert max(start for start, _ in parallel) < min(end for _, end in parallel)

    serial = run_sleepers(tmp_path, workers=1)
    assert peak_overlap(serial) == 1, serial
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(serial))


def test_the_evals_execution_workers_is_the_default_and_the_flag_wins(tmp_path: Path) -> None:
    """AgentV's ``execution.workers``: how many tests run at once when the command line does not say."""
    assert peak_overlap(run_sleepers(tmp_path, workers=None, suite_workers=1)) == 1
    assert peak_overlap(run_sleepers(tmp_path, workers=2, suite_workers=1)) == 2


# -- notes on stderr -------------------------------------------------------------------------------


def test_a_note_is_printed_as_written_on_one_line() -> None:
    message = (
        "run rec-20261122T101500-3fa9c1 is incomplete; finish it with: evalstore run --resume "
        "rec-20261122T101500-3fa9c1 (warning about [/tmp/x] and [bold]y[/bold] :smile:)"
    )
    code = f"from evalstore.cli.output import note; note({message!r})"
    # COLUMNS=80 is what rich assumes for a stderr that is not a terminal.
    result = subprocess.run(
        [PY, "-c", code], cwd=REPO, env={**os.environ, "COLUMNS": "80"}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == message + "\n"


def test_a_cli_target_is_given_the_prompt_and_files_agentv_gives_it(tmp_path: Path) -> None:
    """tests/fixtures/agentv-cli-prompt: the argv the real AgentV 4.42.4 gave a cli target, test by test
    ({PROMPT} with files named by absolute path, {FILES} every file part of the input), is the argv
    ``evalstore run`` gives it (the project folder written as AgentV's, the output file left out)."""
    fixture = REPO / "tests" / "fixtures" / "agentv-cli-prompt"
    project = tmp_path / "project"
    shutil.copytree(fixture, project)
    (project / ".git").mkdir()
    agentv = json.loads((fixture / "agentv-argv.json").read_text(encoding="utf-8"))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = ok_json(evalstore(db, "run", "evals/e.eval.yaml", "--json", cwd=project))
    rows = {
        r["test_id"]: r
        for r in map(json.loads, evalstore(db, "export", run["run_id"], cwd=project).stdout.splitlines())
    }
    for test_id, want in agentv["argv"].items():
        got = json.loads(rows[test_id]["output"].replace(str(project), agentv["folder"]))
        assert got[:-1] == want[:-1], test_id


def test_the_run_target_is_picked_and_followed_as_agentv_eval_does(tmp_path: Path) -> None:
    """``--target default`` is no choice (the eval's target wins); a ``use_target`` chain through
    ``${{ VAR }}`` ends on the target that runs, and the run records that one."""
    project = tmp_path / "project"
    (project / ".agentv").mkdir(parents=True)
    (project / ".git").mkdir()
    answer = f'{sys.executable} -c "import sys; print(sys.argv[1])"'
    (project / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        "  - name: default\n    provider: cli\n    command: " + json.dumps(f"{answer} from-default") + "\n"
        "  - name: agent\n    use_target: ${{ PICKED_AGENT }}\n"
        "  - name: concrete\n    provider: cli\n    command: " + json.dumps(f"{answer} from-concrete") + "\n",
        encoding="utf-8",
    )
    (project / "suite.eval.yaml").write_text(
        "execution:\n  target: agent\ntests:\n  - id: t\n    input: hi\n    assertions:\n"
        "      - {type: contains, value: from-}\n",
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path / 'store.db'}"
    env = {"PICKED_AGENT": "concrete"}
    run = ok_json(evalstore(db, "run", "suite.eval.yaml", "--target", "default", "--json", cwd=project, env=env))
    [row] = [json.loads(line) for line in evalstore(db, "export", run["run_id"], cwd=project).stdout.splitlines()]
    assert (row["target"], row["output"].strip()) == ("concrete", "from-concrete")
