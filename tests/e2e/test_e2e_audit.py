"""``evalstore audit``: every verdict traced to its bytes, every digest checked, tampering named."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from e2e_helpers import Recorded, audit, cli, ok_json, sha256
from judge_server import JudgeServer


def digests_with_status(node: Any, out: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Every digest in an audit document that carries a blob check, with the check's results."""
    out = {} if out is None else out
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "blob" or key.endswith("_blob"):
                digest_key = "sha256" if key == "blob" else key[: -len("blob")] + "sha256"
                if digest_key not in node and "messages_sha256" in node:
                    digest_key = "messages_sha256"
                if node.get(digest_key):
                    out.setdefault(node[digest_key], set()).add(value)
        for value in node.values():
            digests_with_status(value, out)
    elif isinstance(node, list):
        for value in node:
            digests_with_status(value, out)
    return out


def test_every_digest_is_checked_against_the_blob_store(recorded: Recorded, recorded_db: str) -> None:
    doc = audit(recorded_db, recorded.run_id, "q1-report", "--show-prompt")
    digests = digests_with_status(doc)
    # Snapshot, artifacts, transcript, conversions, grader processes and judge calls are all there.
    assert len(digests) >= 12
    assert all(status == {"ok"} for status in digests.values()), digests
    assert doc["blob_problems"] == {} and doc["blobs_checked"] >= len(digests)
    (test,) = doc["tests"]
    assert {v["grader"] for v in test["verdicts"]} == {"names-files", "states-total", "workbook", "quality"}
    assert test["transcript"]["run_id"] == recorded.run_id and test["transcript"]["status"] == "ok"
    workbook = next(v for v in test["verdicts"] if v["grader"] == "workbook")
    (call,) = workbook["grader_calls"]
    assert call["call"] == "process" and call["exit_code"] == 0
    assert call["script_sha256"] == sha256(recorded.suite.grader.read_bytes())
    assert '"score": 1.0' in call["stdout"]
    # --show-prompt gives what the process read: the stdin its digest names.
    assert sha256(call["stdin"].encode("utf-8")) == call["request_sha256"]
    assert json.loads(call["stdin"])["output"]
    text = cli(recorded_db, "audit", recorded.run_id, "q1-report", "--grader", "workbook", "--show-prompt")
    assert text.exit_code == 0 and "--- stdin ---" in text.stdout and call["stdin"] in text.stdout


def test_grader_and_show_prompt_give_the_judge_exchange_byte_for_byte(
    recorded: Recorded, recorded_db: str, judge: JudgeServer
) -> None:
    (test,) = audit(recorded_db, recorded.run_id, "q3-report", "--grader", "quality", "--show-prompt")["tests"]
    (verdict,) = test["verdicts"]
    assert verdict["grader"] == "quality" and verdict["score"] == 0.2
    (call,) = verdict["grader_calls"]
    assert call["model"] == "judge-model-1" and call["parameters"] == {"temperature": 0.0}
    sent = [r for r in recorded.judge_sent if "West,0" in r.user]
    assert len(sent) == 1
    assert call["prompt"] == sent[0].messages
    assert '"score": 0.2' in call["reply"]

    text = cli(recorded_db, "audit", recorded.run_id, "q3-report", "--grader", "quality", "--show-prompt")
    assert text.exit_code == 0, text.stderr
    assert "--- user ---" in text.stdout and "West,0" in text.stdout
    assert "verdict workbook" not in text.stdout

    # Without --show-prompt, the prompt and the reply are left out.
    (plain,) = audit(recorded_db, recorded.run_id, "q3-report", "--grader", "quality")["tests"]
    assert "prompt" not in plain["verdicts"][0]["grader_calls"][0]


def test_a_tampered_blob_is_named(recorded: Recorded, recorded_db: str) -> None:
    (test,) = audit(recorded_db, recorded.run_id, "q2-report")["tests"]
    xlsx = next(a for a in test["artifacts"] if a["path"] == "revenue.xlsx")["sha256"]
    db_file = Path(recorded_db.removeprefix("sqlite:///"))
    conn = sqlite3.connect(db_file)
    try:
        # Blobs compressed against the altered one (store/blobs.py) cannot be read either.
        dependents = {sha for (sha,) in conn.execute("SELECT sha256 FROM blobs WHERE dictionary = ?", (xlsx,))}
        conn.execute("DROP TRIGGER blobs_no_update")
        conn.execute("UPDATE blobs SET data = ?, encoding = 'identity', size = 8 WHERE sha256 = ?", (b"tampered", xlsx))
        conn.commit()
    finally:
        conn.close()

    result = cli(recorded_db, "audit", recorded.run_id, "q2-report", "--json")
    assert result.exit_code == 1, result.output
    doc = ok_json(result, 1)
    assert xlsx in doc["blob_problems"]
    assert next(a for a in doc["tests"][0]["artifacts"] if a["path"] == "revenue.xlsx")["blob"] != "ok"
    text = cli(recorded_db, "audit", recorded.run_id, "q2-report")
    assert text.exit_code == 1 and xlsx[:12] in text.output
    # Another test's audit fails only for its own blobs compressed against the altered one.
    other = cli(recorded_db, "audit", recorded.run_id, "q1-report", "--json")
    problems = json.loads(other.stdout)["blob_problems"]
    assert set(problems) <= dependents and other.exit_code == (1 if problems else 0)
    # verify names it too (directly, or as the dictionary of the first blob it cannot read).
    report = ok_json(cli(recorded_db, "verify", "--json"), 1)
    assert report["ok"] is False and xlsx in str(report["problem"])


def test_audit_of_an_unknown_test_is_one_line(recorded: Recorded, recorded_db: str) -> None:
    result = cli(recorded_db, "audit", recorded.run_id, "q9-report")
    assert result.exit_code == 2 and "q9-report" in result.stderr and "Traceback" not in result.stderr


def test_the_text_shows_scores_as_show_does(recorded: Recorded, recorded_db: str) -> None:
    """Three decimals, the test's score as its verdicts' (a weighted mean is 0.6666666666666666 in JSON)."""
    for test_id in ("q1-report", "q2-report", "q3-report"):
        (test,) = audit(recorded_db, recorded.run_id, test_id)["tests"]
        text = cli(recorded_db, "audit", recorded.run_id, test_id).stdout
        assert f": score {test['score']:.3f} " in text, text
        for v in test["verdicts"]:
            assert f"verdict {v['grader']} ({v['grader_type']}): {v['score']:.3f} " in text
