"""An AgentV run whose model echoed its API keys, imported (``fixtures/agentv-secret-echo``): the keys are
stored nowhere, as ``evalstore run`` stores none, whatever echoes them back. Each is shown as its
``${{ NAME }}`` reference: the agent's (a secret-looking variable of evalstore's environment, and the
targets file's) in its answer, transcript, trace and the judge prompt AgentV kept; the judge's (a name
only the targets file says is a secret) in the verdict's evidence. Every stored byte (the SQLite file,
its WAL, every blob decoded, every event) and every export is searched for each key in each encoding.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from canaries import raw_store_bytes
from e2e_helpers import evalstore, ok_json
from fixture_paths import FIXTURES_DIR

from evalstore.store import EventStore, make_engine
from evalstore.store.blobs import CHUNK_BYTES

FIXTURE = FIXTURES_DIR / "agentv-secret-echo" / "project"
KEYS = {"NU5_API_KEY": "sk-nu5-SECRETKEY-abcdef0123456789", "NU5_JUDGE_ACCESS": "judge-ACCESS-7f3e2d1c0b9a"}


def encodings(value: str) -> set[bytes]:
    """A value as written and as JSON escapes it, once and twice."""
    once = json.dumps(value)[1:-1]
    return {f.encode("utf-8") for f in (value, once, json.dumps(once)[1:-1])}


def holding(found: dict[str, bytes], value: str) -> list[str]:
    return sorted(name for name, data in found.items() if any(form in data for form in encodings(value)))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    return root


def import_run(db_file: Path, run: Path, cwd: Path, *args: str) -> dict:
    return ok_json(evalstore(f"sqlite:///{db_file}", "import", str(run), "--json", *args, cwd=cwd))


def exports(db_file: Path, run_id: str, cwd: Path) -> dict[str, bytes]:
    """What every export format and ``show --json`` print of the run (a bundle: each of its files)."""
    url = f"sqlite:///{db_file}"
    out: dict[str, bytes] = {}
    for fmt in ("agentv-jsonl", "csv", "json"):
        done = evalstore(url, "export", run_id, "--format", fmt, cwd=cwd)
        assert done.returncode == 0, done.stderr
        out[f"export {fmt}"] = done.stdout.encode("utf-8")
    bundle = cwd / "bundle"
    done = evalstore(url, "export", run_id, "--format", "bundle", "-o", str(bundle), cwd=cwd)
    assert done.returncode == 0, done.stderr
    out.update({f"bundle {p.name}": p.read_bytes() for p in bundle.rglob("*") if p.is_file()})
    out["show --json"] = evalstore(url, "show", run_id, "--json", cwd=cwd).stdout.encode("utf-8")
    return out


@pytest.mark.parametrize("where", ["repository", "elsewhere"])
def test_an_import_stores_no_echoed_key(project: Path, tmp_path: Path, where: str) -> None:
    """From the repository AgentV ran in, the import takes the eval above the run and the targets file above
    that; from elsewhere, the run's bundled copies of both (``task/targets.yaml``)."""
    cwd = project if where == "repository" else tmp_path
    db_file = tmp_path / "store.db"
    source = b"".join(p.read_bytes() for p in (project / "runs" / "r1").rglob("*") if p.is_file())
    assert all(holding({"run": source}, value) for value in KEYS.values())  # the run holds both keys

    outcome = import_run(db_file, project / "runs" / "r1", cwd)
    assert outcome["tests"] == 1 and not [w for w in outcome["warnings"] if "is not set" in w]

    found = {**raw_store_bytes(db_file), **exports(db_file, outcome["run_id"], cwd)}
    for value in KEYS.values():
        assert holding(found, value) == []
    # Shown as the reference, where the run shows it: the answer, the judge prompt, the judge's evidence.
    answer = b"Your auth header was: Bearer ${{ NU5_API_KEY }} ok"
    assert any(name.startswith("blob ") and data.startswith(answer) for name, data in found.items())
    row = json.loads(found["export agentv-jsonl"])
    assert answer.decode() in json.dumps(row["output"])
    judged = next(s for s in row["scores"] if s["name"] == "judged")
    assert answer.decode() in judged["input"]["userPrompt"]
    assert judged["assertions"][0]["evidence"] == "judge got Bearer ${{ NU5_JUDGE_ACCESS }}"
    # Digests are of what is stored: verify re-hashes every blob and the chain.
    verified = evalstore(f"sqlite:///{db_file}", "verify", cwd=cwd)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_targets_file_given_names_the_secrets(project: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--targets`` comes first: the judge's key as the variable that file refers to."""
    monkeypatch.delenv("NU5_JUDGE_ACCESS")
    monkeypatch.setenv("OTHER_ACCESS", KEYS["NU5_JUDGE_ACCESS"])
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n  - name: judge\n    provider: openai\n    api_key: ${{ OTHER_ACCESS }}\n    model: m\n",
        encoding="utf-8",
    )
    db_file = tmp_path / "store.db"
    outcome = import_run(db_file, project / "runs" / "r1", tmp_path, "--targets", str(targets))
    found = {**raw_store_bytes(db_file), **exports(db_file, outcome["run_id"], tmp_path)}
    assert holding(found, KEYS["NU5_JUDGE_ACCESS"]) == []
    assert b"judge got Bearer ${{ OTHER_ACCESS }}" in found["export agentv-jsonl"]


def test_a_key_not_set_is_stored_as_the_run_holds_it_and_said(project: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """evalstore cannot mask a value it does not know: the import stores what the source says and warns,
    naming the variable, the target and its targets file (``validate`` says it before anything is stored)."""
    monkeypatch.delenv("NU5_API_KEY")
    run = project / "runs" / "r1"
    checked = ok_json(evalstore("sqlite:///unused.db", "validate", str(run), "--json", cwd=tmp_path))
    said = json.dumps(checked)
    assert "NU5_API_KEY (referenced by target 'llm' in " in said and "is not set" in said

    db_file = tmp_path / "store.db"
    outcome = import_run(db_file, run, tmp_path)
    warning = next(w for w in outcome["warnings"] if w.startswith("NU5_API_KEY"))
    assert str(run / "secret-suite" / "echo" / "task" / "targets.yaml") in warning
    found = raw_store_bytes(db_file)
    assert holding(found, KEYS["NU5_API_KEY"])  # stored as the run holds it
    assert holding(found, KEYS["NU5_JUDGE_ACCESS"]) == []  # the judge's key is set: masked still


def test_a_large_file_holding_a_key_is_refused(project: Path, tmp_path: Path) -> None:
    """A file past a chunk is stored a chunk at a time, never held whole, so it is not masked: holding a
    key (here across the first chunk's end), it is recorded as refused, saying why."""
    key = KEYS["NU5_API_KEY"].encode()
    response = project / "runs" / "r1" / "secret-suite" / "echo" / "outputs" / "response.md"
    response.write_bytes(b"a" * (CHUNK_BYTES - 8) + key + b"b" * 100)
    db_file = tmp_path / "store.db"
    import_run(db_file, project / "runs" / "r1", tmp_path)

    assert holding(raw_store_bytes(db_file), KEYS["NU5_API_KEY"]) == []
    store = EventStore(make_engine(f"sqlite:///{db_file}"))
    try:
        artifacts = [e.payload for e in store.read_all() if e.type == "artifact_stored"]
    finally:
        store.close()
    refused = next(a for a in artifacts if a["path"].endswith("response.md"))
    assert refused["status"] == "refused" and "holds a secret" in refused["reason"]


def test_an_inspect_log_import_stores_no_value_of_a_secret_variable(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An Inspect log goes through the same mask: here a variable whose value the log's first sample asks
    (a real log of ``tests/fixtures/inspect``, as a log that echoed a key would hold it)."""
    secret = "capital of France"
    log = FIXTURES_DIR / "inspect" / "logs" / "capitals.json"
    assert holding({"log": log.read_bytes()}, secret)
    monkeypatch.setenv("CAPITALS_API_KEY", secret)
    db_file = tmp_path / "store.db"
    outcome = import_run(db_file, log, tmp_path)
    found = {**raw_store_bytes(db_file), **exports(db_file, outcome["run_id"], tmp_path)}
    assert holding(found, secret) == []
    assert holding(found, "Which city is the ${{ CAPITALS_API_KEY }}?")  # the question, as stored and exported
    verified = evalstore(f"sqlite:///{db_file}", "verify", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
