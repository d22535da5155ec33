"""The viewer's web application (Starlette): read-only routes, server-rendered Jinja2 pages, and, only
when started with a labeller's name (``evalstore view --label-as NAME``), one route that records labels.

Every page has a stable address a link can carry:

    /runs                               every run, replays under the run they regrade
    /runs/RUN                           a run: results (filtered, sorted, paginated), grader means, snapshot
    /runs/RUN/snapshot/SHA256           one file of the run's eval snapshot
    /runs/RUN/tests/TEST_ID             a test: input, transcript, artifacts, verdicts, prompts, processes
    /runs/RUN/artifacts/SHA256          an artifact's bytes, as a download
    /runs/RUN/artifacts/SHA256/view     an image or HTML artifact inline, sandboxed
    /runs/RUN/compare                   the run against the run it regrades
    /compare/A/B                        any two runs
    /runs/RUN/label                     GET: the next test this person has not labelled (a redirect);
                                        POST: record a label (only with --label-as; token and origin checked)

RUN may be a unique prefix or ``last``; the page then redirects to the full id.
"""

from __future__ import annotations

import json
import math
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs, quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from evalstore import __version__
from evalstore.replay.analysis import browse, labelview
from evalstore.replay.analysis.cases import RunCases
from evalstore.replay.analysis.per_test import key_label
from evalstore.replay.analysis.prompts import prompt_messages
from evalstore.replay.analysis.views import resolve_run
from evalstore.replay.content import is_test_message
from evalstore.replay.errors import NotFoundError, ReplayError
from evalstore.replay.grading.errored import left_out_of_score
from evalstore.replay.labels import LabelInput, record_labels
from evalstore.store import EventStore
from evalstore.store.errors import StoreError
from evalstore.viewer import charts
from evalstore.viewer.security import (
    INLINE_TYPES,
    MAX_FORM_BYTES,
    artifact_headers,
    cross_origin,
    page_headers,
    token_matches,
)

PER_PAGE = 100
MAX_PER_PAGE = 1000
COMPARISONS_KEPT = 8
"""Comparisons whose statistics the viewer keeps between requests (the pages of one comparison)."""
RUN_PAGE_AGREEMENT_MAX = 10_000
"""Runs with more results than this show no agreement on their run page: it reads every verdict of the
run (seconds per 100,000 results, see bench/view.py); the compare page and `evalstore agreement` show it."""
MAX_NOTE = 10_000
"""The longest note a label from the viewer may carry, in characters."""
LABELLING_OFF = "labelling is off: start the viewer with `evalstore view --label-as NAME` to label from the test pages"


class Forbidden(Exception):
    """A state-changing request that did not come from the viewer's own page (403)."""


class BadRequest(Exception):
    pass


class PayloadError(Exception):
    """A label form the viewer does not read: too large (413) or not a form (415)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _score(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _messages(value: Any) -> bool:
    """Whether a value is a list of chat messages (AgentV's ``expected_output`` often is), shown as the
    input's are rather than as JSON."""
    return isinstance(value, list) and bool(value) and all(is_test_message(m) for m in value)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("evalstore.viewer", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests["messages"] = _messages
    env.filters.update(
        score=_score,
        size=_size,
        pretty=_pretty,
        q=lambda s: quote(str(s), safe=""),
        label=key_label,
        short=lambda d: (d or "")[:12],
        swapped=browse.swapped,
        prompt_messages=prompt_messages,
    )
    # A grader that failed to run is left out of its test's score: pages show it as an error, not as its
    # recorded 0 (which would read as a real 0), by the rule the CLI's tables use.
    env.globals.update(version=__version__, left_out=left_out_of_score)
    return env


def _float(params: Any, name: str) -> float | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name}: not a number: {raw!r}") from None
    if not math.isfinite(value):
        raise BadRequest(f"{name}: not a finite number: {raw!r}")
    return value


def _int(params: Any, name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name}: not a whole number: {raw!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name}: must be between {low} and {high}, got {value}")
    return value


V = TypeVar("V")


class _Kept(Generic[V]):
    """The last few values computed, by key, shared between the request threads; the value is computed
    outside the lock, so a slow one does not hold up other pages."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = compute()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value


class Viewer:
    """The routes over one open store."""

    def __init__(self, store: EventStore, *, label_as: str | None = None) -> None:
        self.store = store
        self.label_as = label_as
        self.token = secrets.token_urlsafe(32) if label_as else ""
        """Put in every label form and checked on POST: a page elsewhere cannot read it, so cannot post."""
        self.env = _environment()
        self.env.globals.update(label_as=label_as)
        self._compared: _Kept[browse.CompareStats] = _Kept(COMPARISONS_KEPT)
        self._agreements: _Kept[labelview.PageAgreement | None] = _Kept(COMPARISONS_KEPT)
        self._cases: _Kept[RunCases] = _Kept(COMPARISONS_KEPT)
        """Per run, its test cases (``RunCases``): an import's eval snapshot parsed once for all its test pages."""

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status, headers=page_headers(labelling=bool(self.label_as)))

    def _canonical(self, request: Request, ref: str) -> str | Response:
        run_id = resolve_run(self.store, ref)
        if run_id != ref:
            rest = request.url.path.split("/", 3)[3:]  # what follows /runs/REF
            path = f"/runs/{quote(run_id, safe='')}" + (f"/{quote(rest[0], safe='/')}" if rest else "")
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(path + query, status_code=307)
        return run_id

    # --- pages -----------------------------------------------------------------------------

    def home(self, request: Request) -> Response:
        return RedirectResponse("/runs", status_code=307)

    def runs(self, request: Request) -> Response:
        p = request.query_params
        suite, kind, text = p.get("suite") or None, p.get("kind") or None, p.get("q") or None
        if kind and kind not in ("recorded", "imported", "replay"):
            raise BadRequest(f"kind: one of recorded, imported, replay; got {kind!r}")
        nodes = browse.run_tree(self.store, suite=suite, kind=kind, text=text)
        return self.page(
            "runs.html",
            nodes=nodes,
            suites=browse.suites(self.store),
            suite=suite,
            kind=kind,
            text=text,
            title="Runs",
        )

    def run(self, request: Request) -> Response:
        ref = request.path_params["run_id"]
        run_id = self._canonical(request, ref)
        if isinstance(run_id, Response):
            return run_id
        p = request.query_params
        status = p.get("status") or None
        if status and status not in ("ok", "quality_failure", "execution_error"):
            raise BadRequest(f"status: one of ok, quality_failure, execution_error; got {status!r}")
        verdict = p.get("verdict") or None
        if verdict and verdict not in ("pass", "fail", "skip"):
            raise BadRequest(f"verdict: one of pass, fail, skip; got {verdict!r}")
        order = p.get("sort") or "test_id"
        if order not in browse.ORDERS:
            raise BadRequest(f"sort: one of {', '.join(browse.ORDERS)}; got {order!r}")
        filt = browse.ResultFilter(
            status=status,
            min_score=_float(p, "min"),
            max_score=_float(p, "max"),
            grader=p.get("grader") or None,
            grader_verdict=verdict,
            text=p.get("q") or None,
            order=order,
            descending=p.get("desc") == "1",
        )
        per = _int(p, "per", PER_PAGE, 1, MAX_PER_PAGE)
        number = _int(p, "page", 1, 1, 10**9)
        data = browse.run_page(self.store, run_id, filt, offset=(number - 1) * per, limit=per)
        pages = max(1, math.ceil(data.total / per))
        if number > pages:  # as the compare page says it: not an empty page "showing 101-100"
            raise NotFoundError(f"there is no page {number}: {data.total} results make {pages} page(s)")
        kept = {k: v for k, v in p.items() if k != "page" and v}

        def link(**change: Any) -> str:
            query = {**kept, **{k: str(v) for k, v in change.items() if v is not None}}
            return f"/runs/{quote(run_id, safe='')}?{urlencode(query)}"

        def sort_link(column: str) -> str:
            desc = "1" if filt.order == column and not filt.descending else "0"
            query = {**kept, "sort": column, "desc": desc}
            return f"/runs/{quote(run_id, safe='')}?{urlencode(query)}"

        return self.page(
            "run.html",
            data=data,
            run_id=run_id,
            filt=filt,
            page=number,
            pages=pages,
            per=per,
            link=link,
            sort_link=sort_link,
            chart=charts.histogram(data.histogram),
            grader_names=[g.grader for g in data.graders],
            agreement=self._agreement([run_id]) if (data.summary.tests or 0) <= RUN_PAGE_AGREEMENT_MAX else None,
            agreement_skipped=(data.summary.tests or 0) > RUN_PAGE_AGREEMENT_MAX,
            title=run_id,
        )

    def snapshot(self, request: Request) -> Response:
        run_id = self._canonical(request, request.path_params["run_id"])
        if isinstance(run_id, Response):
            return run_id
        sha = request.path_params["sha256"]
        path, data = browse.snapshot_file(self.store, run_id, sha)
        text = data.decode("utf-8", errors="replace")
        return self.page("snapshot.html", run_id=run_id, path=path, sha=sha, text=text, size=len(data), title=path)

    def test(self, request: Request) -> Response:
        run_id = self._canonical(request, request.path_params["run_id"])
        if isinstance(run_id, Response):
            return run_id
        test_id = request.path_params["test_id"]
        cases = self._cases.get(run_id, lambda: RunCases.of(self.store, run_id))
        data = browse.test_page(self.store, run_id, test_id, cases)
        verify = request.query_params.get("verify") == "1"
        return self.page(
            "test.html",
            run_id=run_id,
            test_id=test_id,
            data=data,
            verify=verify,
            checked_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            labelling=self._labelling(request, run_id, test_id),
            title=f"{test_id} in {run_id}",
        )

    def _labelling(self, request: Request, run_id: str, test_id: str) -> dict[str, Any]:
        """What the test page needs to show labels and, with --label-as, the forms: each result's labels,
        this person's, and whether its verdicts are hidden (blind until labelled, or revealed on request)."""
        labels = labelview.labels_of_test(self.store, run_id, test_id)
        grader = request.query_params.get("grader") or None
        mine = {key: [x for x in found if x.label.by == self.label_as] for key, found in labels.items()}
        next_query = urlencode({"after": test_id, **({"grader": grader} if grader else {})})
        return {
            "on": bool(self.label_as),
            "by": self.label_as,
            "token": self.token,
            "labels": labels,
            "mine": {key: found for key, found in mine.items() if found},
            "reveal": request.query_params.get("reveal") == "1",
            "grader": grader,
            "graders": labelview.graders_of_test(self.store, run_id, test_id) if self.label_as else [],
            "next": f"/runs/{quote(run_id, safe='')}/label?{next_query}",
        }

    def label_next(self, request: Request) -> Response:
        """GET /runs/RUN/label: a redirect to the next test this person has not labelled (after ``after``,
        for ``grader``), or a page saying every test is labelled. Changes nothing."""
        if not self.label_as:
            raise NotFoundError(LABELLING_OFF)
        run_id = resolve_run(self.store, request.path_params["run_id"])
        p = request.query_params
        grader = p.get("grader") or None
        found = labelview.next_unlabelled(self.store, run_id, by=self.label_as, grader=grader, after=p.get("after"))
        if found.test_id is None:
            return self.page("labelled.html", run_id=run_id, found=found, grader=grader, title=f"labelled: {run_id}")
        query = f"?{urlencode({'grader': grader})}" if grader else ""
        return RedirectResponse(
            f"/runs/{quote(run_id, safe='')}/tests/{quote(found.test_id, safe='')}{query}", status_code=303
        )

    def record_label(self, run_ref: str, form: dict[str, str]) -> Response:
        """POST /runs/RUN/label, after the origin and token checks: record the label as ``evalstore
        label`` does, then show the test again (its verdicts now revealed)."""
        assert self.label_as
        run_id = resolve_run(self.store, run_ref)
        test_id = form.get("test") or ""
        if not test_id:
            raise BadRequest("test: missing")
        verdict = form.get("verdict")
        if verdict not in ("pass", "fail", "skip"):
            raise BadRequest(f"verdict: one of pass, fail, skip; got {verdict!r}")
        grader = form.get("grader") or None
        if grader is not None and grader not in labelview.graders_of_test(self.store, run_id, test_id):
            raise BadRequest(f"grader: {grader!r} did not judge {test_id} in {run_id}")
        back = {"grader": grader} if grader else {}
        if verdict == "skip":
            return RedirectResponse(
                f"/runs/{quote(run_id, safe='')}/label?{urlencode({'after': test_id, **back})}", status_code=303
            )
        note = (form.get("note") or "").strip() or None
        if note is not None and len(note) > MAX_NOTE:
            raise BadRequest(f"note: at most {MAX_NOTE} characters, got {len(note)}")
        attempt = _int(form, "attempt", 1, 1, 10**6)
        section = _int(form, "section", 1, 1, 10**6)
        record_labels(
            self.store,
            [
                LabelInput(
                    test=test_id,
                    target=form.get("target") or None,
                    attempt=attempt,
                    verdict=verdict,
                    grader=grader,
                    note=note,
                    by=self.label_as,
                )
            ],
            run=run_id,
        )
        query = f"?{urlencode(back)}" if back else ""
        return RedirectResponse(
            f"/runs/{quote(run_id, safe='')}/tests/{quote(test_id, safe='')}{query}#label-{section}", status_code=303
        )

    def artifact(self, request: Request) -> Response:
        run_id = self._canonical(request, request.path_params["run_id"])
        if isinstance(run_id, Response):
            return run_id
        a, _kind, data = browse.artifact(self.store, run_id, request.path_params["sha256"])
        inline = request.url.path.endswith("/view")
        media = (a.media_type or "application/octet-stream").split(";")[0].strip().lower()
        if inline and media not in INLINE_TYPES:
            raise BadRequest(f"{a.path} ({media}) is not shown inline; download it instead")
        served = media if inline else "application/octet-stream"
        if served == "text/html":
            served = "text/html; charset=utf-8"
        headers = artifact_headers(a.path, inline=inline)
        if a.size is not None:
            headers["Content-Length"] = str(a.size)
        return StreamingResponse(data, media_type=served, headers=headers)

    def run_compare(self, request: Request) -> Response:
        run_id = self._canonical(request, request.path_params["run_id"])
        if isinstance(run_id, Response):
            return run_id
        parent = browse.default_baseline(self.store, run_id)
        return RedirectResponse(f"/compare/{quote(parent, safe='')}/{quote(run_id, safe='')}", status_code=307)

    def compare_form(self, request: Request) -> Response:
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not a or not b:
            raise BadRequest("compare: give two runs, ?a=RUN&b=RUN")
        a, b = resolve_run(self.store, a), resolve_run(self.store, b)
        return RedirectResponse(f"/compare/{quote(a, safe='')}/{quote(b, safe='')}", status_code=307)

    def compare(self, request: Request) -> Response:
        ref_a, ref_b = request.path_params["a"], request.path_params["b"]
        a, b = resolve_run(self.store, ref_a), resolve_run(self.store, ref_b)
        if (a, b) != (ref_a, ref_b):
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(f"/compare/{quote(a, safe='')}/{quote(b, safe='')}{query}", status_code=307)
        number = _int(request.query_params, "page", 1, 1, 10**9)
        data = browse.compare_page(self.store, self._compare_stats(a, b), page=number)
        rows = [
            (key_label(t.key), t.delta, t.flip, f"#t-{data.first + i}")
            for i, t in enumerate(data.changed)  # the chart labels each changed test and links to its detail
        ]

        def link(page: int) -> str:
            return f"/compare/{quote(a, safe='')}/{quote(b, safe='')}?page={page}"

        return self.page(
            "compare.html",
            data=data,
            c=data.stats,
            a=a,
            b=b,
            link=link,
            chart=charts.deltas(rows),
            agreement=self._agreement([a, b]),
            title=f"{a} vs {b}",
        )

    def _agreement(self, run_ids: list[str]) -> labelview.PageAgreement | None:
        """The runs' agreement with the labels of their transcripts (None without labels), kept while
        neither the runs nor their labels change."""
        key = (tuple(run_ids), labelview.labels_version(self.store, run_ids))
        return self._agreements.get(key, lambda: labelview.page_agreement(self.store, run_ids))

    def _compare_stats(self, a: str, b: str) -> browse.CompareStats:
        """The whole-run statistics of a comparison, kept while neither run's stream grows, so paging
        through its changed tests reads only each page."""
        key = (a, b, self.store.stream_version(a), self.store.stream_version(b))
        return self._compared.get(key, lambda: browse.compare_stats(self.store, a, b))

    # --- errors ----------------------------------------------------------------------------

    def error(self, status: int, message: str) -> HTMLResponse:
        return self.page("error.html", status=status, status_code=status, message=message, title=f"{status}")


async def _form(request: Request) -> dict[str, str]:
    """The label form's fields (URL-encoded, each once), refusing anything else or anything large."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise PayloadError(415, f"expected a form (application/x-www-form-urlencoded), got {media or 'no type'}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PayloadError(413, f"the form is larger than {MAX_FORM_BYTES} bytes")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise BadRequest("the form is not UTF-8") from None
    repeated = sorted(k for k, v in fields.items() if len(v) > 1)
    if repeated:
        raise BadRequest(f"fields given more than once: {', '.join(repeated)}")
    return {k: v[0] for k, v in fields.items()}


def create_app(store: EventStore, *, allowed_hosts: list[str] | None = None, label_as: str | None = None) -> Starlette:
    """The viewer over ``store``. ``allowed_hosts``: the Host headers it answers (others get 400), so a
    web page elsewhere cannot reach it through DNS rebinding; default, the loopback names. ``label_as``:
    the name labels from the test pages are recorded under; without it nothing can be recorded."""
    viewer = Viewer(store, label_as=(label_as or "").strip() or None)

    def failed(exc: Exception) -> Response:
        if isinstance(exc, Forbidden):
            return viewer.error(403, str(exc))
        if isinstance(exc, PayloadError):
            return viewer.error(exc.status, str(exc))
        if isinstance(exc, BadRequest):
            return viewer.error(400, str(exc))
        if isinstance(exc, NotFoundError):
            return viewer.error(404, str(exc))
        if isinstance(exc, ReplayError):
            return viewer.error(400, str(exc))
        if isinstance(exc, StoreError):
            return viewer.error(500, f"the store could not be read: {exc}")
        raise exc

    def damaged(exc: Exception) -> Response:
        # A page that failed on a damaged store shows the damage; on a sound one it is a bug, raised.
        damage = store.damage_behind(exc)
        if damage is None:
            raise exc
        return viewer.error(500, str(damage))

    def wrap(handler):  # type: ignore[no-untyped-def]
        def endpoint(request: Request) -> Response:
            try:
                return handler(request)
            except (Forbidden, PayloadError, BadRequest, ReplayError, StoreError) as exc:
                return failed(exc)
            except Exception as exc:
                return damaged(exc)

        return endpoint

    async def label_post(request: Request) -> Response:
        try:
            why = cross_origin(request.headers, request.url.scheme, request.headers.get("host", ""))
            if why:
                raise Forbidden(f"refused: {why}")
            form = await _form(request)
            if not token_matches(form.get("token"), viewer.token):
                raise Forbidden("refused: the form's token is missing or not this viewer's (reload the page)")
            return await run_in_threadpool(viewer.record_label, request.path_params["run_id"], form)
        except (Forbidden, PayloadError, BadRequest, ReplayError, StoreError) as exc:
            return failed(exc)

    routes = [
        Route("/", wrap(viewer.home)),
        Route("/runs", wrap(viewer.runs)),
        Route("/runs/{run_id}", wrap(viewer.run)),
        Route("/runs/{run_id}/compare", wrap(viewer.run_compare)),
        Route("/runs/{run_id}/label", wrap(viewer.label_next), methods=["GET"]),
        Route("/runs/{run_id}/snapshot/{sha256}", wrap(viewer.snapshot)),
        Route("/runs/{run_id}/artifacts/{sha256}", wrap(viewer.artifact)),
        Route("/runs/{run_id}/artifacts/{sha256}/view", wrap(viewer.artifact)),
        Route("/runs/{run_id}/tests/{test_id:path}", wrap(viewer.test)),
        Route("/compare", wrap(viewer.compare_form)),
        Route("/compare/{a}/{b}", wrap(viewer.compare)),
        Mount("/static", StaticFiles(packages=[("evalstore.viewer", "static")]), name="static"),
    ]
    if viewer.label_as:
        routes.insert(0, Route("/runs/{run_id}/label", label_post, methods=["POST"]))
    hosts = allowed_hosts or ["127.0.0.1", "localhost", "[::1]", "::1"]

    async def not_found(request: Request, exc: Exception) -> Response:
        return viewer.error(404, f"no page at {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        message = "the viewer is read-only" + ("" if viewer.label_as else f"; {LABELLING_OFF}")
        return Response(message, status_code=405, headers={**page_headers(), "Allow": "GET, HEAD"})

    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
        exception_handlers={404: not_found, 405: not_allowed},
    )
