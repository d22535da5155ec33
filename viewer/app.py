"""The viewer's web application (Starlette): read-only routes, server-rendered Jinja2 pages.

Every page has a stable address a link can carry:

    /runs                               every run, replays under the run they regrade
    /runs/RUN                           a run: results (filtered, sorted, paginated), grader means, snapshot
    /runs/RUN/snapshot/SHA256           one file of the run's eval snapshot
    /runs/RUN/tests/TEST_ID             a test: input, transcript, artifacts, verdicts, prompts, processes
    /runs/RUN/artifacts/SHA256          an artifact's bytes, as a download
    /runs/RUN/artifacts/SHA256/view     an image or HTML artifact inline, sandboxed
    /runs/RUN/compare                   the run against the run it regrades
    /compare/A/B                        any two runs

RUN may be a unique prefix or ``last``; the page then redirects to the full id.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from evalstore import __version__
from evalstore.replay.analysis import browse
from evalstore.replay.analysis.compare import key_label
from evalstore.replay.analysis.views import resolve_run
from evalstore.replay.errors import NotFoundError, ReplayError
from evalstore.store import EventStore
from evalstore.store.errors import StoreError
from evalstore.viewer import charts
from evalstore.viewer.security import INLINE_TYPES, artifact_headers, page_headers

PER_PAGE = 100
MAX_PER_PAGE = 1000
COMPARISONS_KEPT = 8
"""Comparisons whose statistics the viewer keeps between requests (the pages of one comparison)."""


class BadRequest(Exception):
    pass


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


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("evalstore.viewer", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        score=_score,
        size=_size,
        pretty=_pretty,
        q=lambda s: quote(str(s), safe=""),
        label=key_label,
        short=lambda d: (d or "")[:12],
        swapped=browse.swapped,
    )
    env.globals.update(version=__version__)
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


class Viewer:
    """The routes over one open store."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.env = _environment()
        self._compared: OrderedDict[tuple[str, str, int, int], browse.CompareStats] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status, headers=page_headers())

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
        data = browse.test_page(self.store, run_id, test_id)
        verify = request.query_params.get("verify") == "1"
        return self.page(
            "test.html",
            run_id=run_id,
            test_id=test_id,
            data=data,
            verify=verify,
            checked_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            title=f"{test_id} in {run_id}",
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
        return Response(data, media_type=served, headers=artifact_headers(a.path, inline=inline))

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
            title=f"{a} vs {b}",
        )

    def _compare_stats(self, a: str, b: str) -> browse.CompareStats:
        """The whole-run statistics of a comparison, kept while neither run's stream grows, so paging
        through its changed tests reads only each page."""
        key = (a, b, self.store.stream_version(a), self.store.stream_version(b))
        with self._lock:
            stats = self._compared.get(key)
            if stats is not None:
                self._compared.move_to_end(key)
                return stats
        stats = browse.compare_stats(self.store, a, b)
        with self._lock:
            self._compared[key] = stats
            while len(self._compared) > COMPARISONS_KEPT:
                self._compared.popitem(last=False)
        return stats

    # --- errors ----------------------------------------------------------------------------

    def error(self, status: int, message: str) -> HTMLResponse:
        return self.page("error.html", status=status, status_code=status, message=message, title=f"{status}")


def create_app(store: EventStore, *, allowed_hosts: list[str] | None = None) -> Starlette:
    """The viewer over ``store``. ``allowed_hosts``: the Host headers it answers (others get 400), so a
    web page elsewhere cannot reach it through DNS rebinding; default, the loopback names."""
    viewer = Viewer(store)

    def wrap(handler):  # type: ignore[no-untyped-def]
        def endpoint(request: Request) -> Response:
            try:
                return handler(request)
            except BadRequest as exc:
                return viewer.error(400, str(exc))
            except NotFoundError as exc:
                return viewer.error(404, str(exc))
            except ReplayError as exc:
                return viewer.error(400, str(exc))
            except StoreError as exc:
                return viewer.error(500, f"the store could not be read: {exc}")

        return endpoint

    routes = [
        Route("/", wrap(viewer.home)),
        Route("/runs", wrap(viewer.runs)),
        Route("/runs/{run_id}", wrap(viewer.run)),
        Route("/runs/{run_id}/compare", wrap(viewer.run_compare)),
        Route("/runs/{run_id}/snapshot/{sha256}", wrap(viewer.snapshot)),
        Route("/runs/{run_id}/artifacts/{sha256}", wrap(viewer.artifact)),
        Route("/runs/{run_id}/artifacts/{sha256}/view", wrap(viewer.artifact)),
        Route("/runs/{run_id}/tests/{test_id:path}", wrap(viewer.test)),
        Route("/compare", wrap(viewer.compare_form)),
        Route("/compare/{a}/{b}", wrap(viewer.compare)),
        Mount("/static", StaticFiles(packages=[("evalstore.viewer", "static")]), name="static"),
    ]
    hosts = allowed_hosts or ["127.0.0.1", "localhost", "[::1]", "::1"]

    async def not_found(request: Request, exc: Exception) -> Response:
        return viewer.error(404, f"no page at {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return Response("the viewer is read-only", status_code=405, headers={**page_headers(), "Allow": "GET, HEAD"})

    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
        exception_handlers={404: not_found, 405: not_allowed},
    )
