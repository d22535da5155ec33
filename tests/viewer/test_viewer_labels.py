"""Labelling from the viewer (``evalstore view --label-as NAME``) and agreement on its pages, over HTTP
(Starlette's test client) on real stores: labels posted from a test page are in the store (read back with
the library), every refused request changes nothing, blind mode hides the verdicts until the answer is
labelled, and the run and compare pages show what ``evalstore agreement`` and ``compare`` compute."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from labelled_runs import add_run
from markupsafe import escape
from starlette.testclient import TestClient
from viewer_helpers import EVALSTORE

from evalstore.replay.analysis.agreement import agreement, agreement_difference
from evalstore.replay.labels import LabelInput, current_labels, read_labels, record_labels
from evalstore.replay.material import load_results
from evalstore.store import EventStore
from evalstore.viewer import create_app

ORIGIN = "http://127.0.0.1"
TESTS = [f"t{i:02d}" for i in range(12)]
HUMAN = {t: i % 3 != 0 for i, t in enumerate(TESTS)}  # what the people say: 8 pass, 4 fail
V1 = dict.fromkeys(TESTS, True)  # a lenient prompt: passes everything
V2 = {t: HUMAN[t] if i != 1 else False for i, t in enumerate(TESTS)}  # a careful one: wrong once


@dataclass
class Family:
    store: EventStore
    recorded: str
    lenient: str
    careful: str


@pytest.fixture
def family(store_url: str) -> Iterator[Family]:
    store = EventStore.open(store_url)
    recorded = add_run(store, "rec-20260101T000000-aaaaaa", V1)
    lenient = add_run(store, "rpl-20260102T000000-bbbbbb", V1, parent=recorded)
    careful = add_run(store, "rpl-20260103T000000-cccccc", V2, parent=recorded)
    yield Family(store, recorded, lenient, careful)
    store.close()


def _client(store: EventStore, label_as: str | None = "alice") -> TestClient:
    return TestClient(create_app(store, label_as=label_as), base_url=ORIGIN)


def _token(html: str) -> str:
    found = re.search(r'name="token" value="([^"]+)"', html)
    assert found, "no label form on the page"
    return found.group(1)


def _form(token: str, test: str, verdict: str, **more: str) -> dict[str, str]:
    return {"token": token, "test": test, "target": "", "attempt": "1", "section": "1", "verdict": verdict, **more}


def _post(client: TestClient, run: str, data: dict[str, str], **headers: str):  # type: ignore[no-untyped-def]
    return client.post(f"/runs/{run}/label", data=data, headers={"Origin": ORIGIN, **headers}, follow_redirects=False)


def test_a_label_posted_from_the_test_page_is_in_the_store(family: Family) -> None:
    store, run = family.store, family.careful
    client = _client(store)
    page = client.get(f"/runs/{run}/tests/t01")
    assert page.status_code == 200
    assert page.headers["referrer-policy"] == "same-origin"  # so the browser sends a real Origin with the POST
    r = _post(client, run, _form(_token(page.text), "t01", "fail", grader="quality", note="misses the point"))
    assert r.status_code == 303
    assert r.headers["location"] == f"/runs/{run}/tests/t01?grader=quality#label-1"
    # Read back with the library: one label, on the recorded run's transcript (it applies to every regrade).
    [label] = current_labels(store, family.recorded)
    lab = label.label
    assert (lab.run_id, lab.test_id, lab.attempt, lab.by) == (family.recorded, "t01", 1, "alice")
    assert (lab.verdict, lab.grader, lab.note, lab.score) == ("fail", "quality", "misses the point", None)
    transcript = next(
        s for s in store.read_stream(family.recorded, types=["transcript_recorded"]) if s.event.test_id == "t01"
    )
    assert lab.transcript_event_id == transcript.event_id
    # A second label by the same person supersedes the first; both stay in the log.
    page = client.get(r.headers["location"])
    assert "misses the point" in page.text and "You labelled this answer" in page.text
    r = _post(client, run, _form(_token(page.text), "t01", "pass", grader="quality"))
    assert r.status_code == 303
    history = read_labels(store, family.recorded)
    assert [(x.label.verdict, x.superseded) for x in history] == [("fail", True), ("pass", False)]
    # Skip records nothing and moves on to the next test.
    r = _post(client, run, _form(_token(page.text), "t05", "skip"))
    assert r.status_code == 303 and r.headers["location"] == f"/runs/{run}/label?after=t05"
    assert len(read_labels(store, family.recorded)) == 2


def test_blind_until_labelled_or_revealed(family: Family) -> None:
    store, run = family.store, family.careful
    record_labels(store, [LabelInput(test="t02", verdict="fail", note="bob's reason", by="bob")], run=run)
    client = _client(store)
    url = f"/runs/{run}/tests/t02"

    def shown(html: str) -> bool:
        verdicts = 'id="verdict-quality"' in html
        score = 'class="score"' in html
        assert verdicts == score  # the heading's score and the verdicts go together
        return verdicts

    blind = client.get(url).text
    assert not shown(blind)
    assert "verdict hidden" in blind and "Hidden until you label this answer" in blind
    assert "not passed" not in blind and "passed ·" not in blind
    assert "bob's reason" not in blind and "1 label(s) by others, hidden" in blind
    assert 'id="reveal"' in blind and 'id="next-unlabelled"' in blind
    # Revealing is the person's choice; it records nothing.
    revealed = client.get(url, params={"reveal": "1"}).text
    assert shown(revealed) and "bob&#39;s reason" in revealed
    assert len(current_labels(store, family.recorded)) == 1
    # After labelling, the answer's verdicts and the others' labels are shown.
    r = _post(client, run, _form(_token(blind), "t02", "pass"))
    assert r.status_code == 303
    after = client.get(r.headers["location"]).text
    assert shown(after) and "bob&#39;s reason" in after
    # Another test stays blind; without --label-as nothing is hidden.
    assert not shown(client.get(f"/runs/{run}/tests/t03").text)
    assert shown(_client(store, None).get(f"/runs/{run}/tests/t03").text)


def test_without_label_as_the_viewer_records_nothing(family: Family) -> None:
    store, run = family.store, family.careful
    client = _client(store, None)
    page = client.get(f"/runs/{run}/tests/t01")
    assert page.status_code == 200
    assert "evalstore view --label-as" in page.text and 'id="labelling-off"' in page.text
    assert "<form" not in page.text.split("<main>")[1] and 'name="token"' not in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    token = _token(_client(store).get(f"/runs/{run}/tests/t01").text)  # even a real token of another viewer
    r = _post(client, run, _form(token, "t01", "pass"))
    assert r.status_code == 405 and "--label-as" in r.text and r.headers["allow"] == "GET, HEAD"
    r = client.get(f"/runs/{run}/label")
    assert r.status_code == 404 and "--label-as" in r.text
    assert read_labels(store, family.recorded) == []


def test_refused_requests_change_nothing(family: Family) -> None:
    store, run = family.store, family.careful
    client = _client(store)
    token = _token(client.get(f"/runs/{run}/tests/t01").text)
    good = _form(token, "t01", "pass")
    refused = {
        "wrong token": (403, _post(client, run, {**good, "token": token[:-2] + "xx"})),
        "no token": (403, _post(client, run, {k: v for k, v in good.items() if k != "token"})),
        "another viewer's token": (
            403,
            _post(client, run, {**good, "token": _token(_client(store).get(f"/runs/{run}/tests/t01").text)}),
        ),
        "cross-origin": (403, _post(client, run, good, Origin="http://evil.example")),
        "another port": (403, _post(client, run, good, Origin="http://127.0.0.1:9999")),
        "null origin": (403, _post(client, run, good, Origin="null")),
        "cross-site fetch": (403, _post(client, run, good, **{"Sec-Fetch-Site": "cross-site"})),
        "no origin": (
            403,
            client.post(f"/runs/{run}/label", data=good, follow_redirects=False),
        ),
        "another host": (
            400,
            client.post(
                f"/runs/{run}/label", data=good, headers={"Host": "evil.example", "Origin": "http://evil.example"}
            ),
        ),
        "json": (
            415,
            client.post(f"/runs/{run}/label", json=good, headers={"Origin": ORIGIN}, follow_redirects=False),
        ),
        "too large": (413, _post(client, run, {**good, "note": "x" * 70_000})),
        "bad verdict": (400, _post(client, run, {**good, "verdict": "maybe"})),
        "no test": (400, _post(client, run, {**good, "test": ""})),
        "unknown test": (400, _post(client, run, {**good, "test": "nope"})),
        "unknown grader": (400, _post(client, run, {**good, "grader": "nope"})),
        "long note": (400, _post(client, run, {**good, "note": "x" * 10_001})),
        "bad attempt": (400, _post(client, run, {**good, "attempt": "two"})),
        "unknown run": (404, _post(client, "rpl-nope", good)),
        "repeated field": (
            400,
            client.post(
                f"/runs/{run}/label",
                content=f"token={token}&test=t01&verdict=pass&verdict=fail",
                headers={"Origin": ORIGIN, "Content-Type": "application/x-www-form-urlencoded"},
                follow_redirects=False,
            ),
        ),
    }
    for why, (status, r) in refused.items():
        assert r.status_code == status, (why, r.status_code, r.text[:300])
    assert "token" in refused["wrong token"][1].text and "evil.example" in refused["cross-origin"][1].text
    # GETs never record, whatever they carry.
    assert client.get(f"/runs/{run}/label", params=good, follow_redirects=False).status_code == 303
    assert client.get(f"/runs/{run}/tests/t01", params=good).status_code == 200
    assert read_labels(store, family.recorded) == []
    # The same form, from the page, with its token and origin: recorded.
    assert _post(client, run, good).status_code == 303
    assert len(read_labels(store, family.recorded)) == 1


def test_next_unlabelled_test_makes_a_loop(family: Family) -> None:
    store, run = family.store, family.lenient
    client = _client(store)
    r = client.get(f"/runs/{run}/label", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/runs/{run}/tests/t00"
    seen: list[str] = []
    location = r.headers["location"]
    while len(seen) <= len(TESTS):
        page = client.get(location)
        test = location.rsplit("/", 1)[1]
        seen.append(test)
        skip = test == "t03" and seen.count("t03") == 1  # skip it the first time round
        r = _post(client, run, _form(_token(page.text), test, "skip" if skip else "pass" if HUMAN[test] else "fail"))
        assert r.status_code == 303
        if skip:
            next_url = r.headers["location"]
        else:  # the test again, its verdicts now shown, with the link to the next one
            found = re.search(r'id="next-unlabelled" href="([^"]+)"', client.get(r.headers["location"]).text)
            assert found
            next_url = found.group(1).replace("&amp;", "&")
        r = client.get(next_url, follow_redirects=False)
        if r.status_code == 200:
            assert "Nothing left to label" in r.text
            break
        assert r.status_code == 303
        location = r.headers["location"]
    # The skipped test came back after the others, and each was labelled once.
    assert seen == [*TESTS, "t03"]
    labels = current_labels(store, family.recorded)
    assert {x.label.test_id: x.label.verdict for x in labels} == {t: "pass" if HUMAN[t] else "fail" for t in TESTS}
    done = client.get(f"/runs/{run}/label")
    assert done.status_code == 200 and f"{len(TESTS)} of {len(TESTS)}" in done.text
    # A queue per grader: labels for the whole answer do not count for it.
    r = client.get(f"/runs/{run}/label", params={"grader": "quality"}, follow_redirects=False)
    assert r.headers["location"] == f"/runs/{run}/tests/t00?grader=quality"


def test_run_and_compare_pages_show_agreement_per_grader(family: Family) -> None:
    store = family.store
    client = _client(store, None)
    compare_url = f"/compare/{family.lenient}/{family.careful}"
    assert 'id="agreement"' not in client.get(compare_url).text  # no labels yet: no section
    assert 'id="agreement"' not in client.get(f"/runs/{family.careful}").text
    record_labels(
        store,
        [LabelInput(test=t, verdict="pass" if HUMAN[t] else "fail", by="carol") for t in TESTS],
        run=family.recorded,
    )
    html = client.get(compare_url).text
    section = html.split('id="agreement"')[1].split("</section>")[0]

    def row(run: str, grader: str) -> str:
        return section.split(f'<tr data-run="{run}" data-grader="{grader}">')[1].split("</tr>")[0]

    # Independent count: the lenient prompt passes all 12 (8 right, 4 false passes); the careful one is
    # wrong once (t01, a pass it failed).
    assert "8/0/4/0" in row(family.lenient, "quality") and "7/1/0/4" in row(family.careful, "quality")
    # The numbers are the library's, as `evalstore agreement` and `compare` print them.
    labels = current_labels(store, family.recorded)
    results = [load_results(store, family.lenient), load_results(store, family.careful)]
    report = agreement(family.recorded, labels, results)
    for r in report.rows:
        acc = r.agreement.accuracy
        assert f'{acc.value:.2f} <span class="muted">[{acc.low:.2f}, {acc.high:.2f}]</span>' in row(r.run_id, r.grader)
        corrected = r.corrected_pass_rate
        if corrected.value is not None:
            assert f"{corrected.value:.2f}" in row(r.run_id, r.grader)
    [_test_level, quality] = agreement_difference(labels, *results)
    diff = section.split('id="agreement-difference"')[1]
    q = diff.split('<tr data-grader="quality">')[1].split("</tr>")[0]
    assert f"{quality.mcnemar.p_value:.4g}" in q and str(escape(quality.verdict)) in q and "B agrees more" in q
    assert f"{quality.accuracy_a:.3f}" in q and f"{quality.accuracy_b:.3f}" in q
    # One person labelled: no alpha. A second labeller who disagrees on one test gives the ceiling.
    assert "Krippendorff" not in section
    record_labels(store, [LabelInput(test="t00", verdict="pass", by="dave")], run=family.recorded)
    record_labels(store, [LabelInput(test="t01", verdict="pass", by="dave")], run=family.recorded)
    section = client.get(compare_url).text.split('id="agreement"')[1].split("</section>")[0]
    alpha = agreement(family.recorded, current_labels(store, family.recorded), results).alpha["quality"]
    assert alpha.value is not None
    assert f"agree on quality: Krippendorff's alpha {alpha.value:.3f}" in section
    # The run page: that run's graders only.
    run_page = client.get(f"/runs/{family.careful}").text.split('id="agreement"')[1].split("</section>")[0]
    assert f'data-run="{family.careful}"' in run_page and f'data-run="{family.lenient}"' not in run_page
    # Runs of different recorded runs share no labels: no section.
    other = add_run(store, "rec-20260104T000000-dddddd", V1)
    assert 'id="agreement"' not in client.get(f"/compare/{other}/{family.careful}").text


def test_view_refuses_an_empty_labeller_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    db = f"sqlite:///{tmp_path / 'store.db'}"
    done = subprocess.run(
        [str(EVALSTORE), "--db", db, "view", "--label-as", "  "], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 2 and "--label-as" in done.stderr
