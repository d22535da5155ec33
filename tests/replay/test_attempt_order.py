"""A test's attempts are listed in ascending order, though a replay records them as they finish."""

from __future__ import annotations

import re

from labelled_runs import add_run
from starlette.testclient import TestClient

from evalstore.replay.analysis.audit import audit_test
from evalstore.store import EventStore
from evalstore.viewer import create_app


def test_audit_and_the_test_page_list_a_replays_attempts_in_order(store: EventStore) -> None:
    add_run(store, "rec-1", {"add": True}, attempts=(1, 2, 3))
    add_run(store, "rpl-1", {"add": True}, parent="rec-1", attempts=(2, 3, 1))  # as the replay finished them
    for run in ("rec-1", "rpl-1"):
        assert [t["attempt"] for t in audit_test(store, run, "add")["tests"]] == [1, 2, 3]
    page = TestClient(create_app(store), base_url="http://127.0.0.1").get("/runs/rpl-1/tests/add").text
    assert re.findall(r"\badd(?:#\d)? ·", page) == ["add ·", "add#2 ·", "add#3 ·"]
