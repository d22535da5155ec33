"""What keeps a run's content from acting in the viewer: response headers for pages and for artifacts,
and the checks on the one request that changes anything (recording a label, with ``--label-as``).

Everything a run holds (the agent's answer and files, judge replies, converter output) is untrusted.
Pages escape it (Jinja2 autoescape) and forbid inline scripts and styles and any script not served by the
viewer itself; artifacts are served as downloads, or, for the few kinds shown inline (images, and HTML
in a frame), under a ``sandbox`` policy that gives them an opaque origin with scripts off.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; frame-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""For the viewer's own pages: no inline script or style, nothing from the network."""

ARTIFACT_CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"
"""For an artifact: a sandboxed document (opaque origin, no scripts, no forms, no navigation), which may
be framed only by the viewer."""

COMMON: Mapping[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}

INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "text/html"})
"""Artifact media types ``…/view`` serves inline (sandboxed); everything else is only downloadable."""

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


LABELLING_REFERRER = "same-origin"
"""The referrer policy of pages when labelling is on. Under ``no-referrer`` a browser sends ``Origin: null``
with a form's POST, which :func:`cross_origin` must refuse (a sandboxed frame sends that too);
``same-origin`` sends the real origin to the viewer and still nothing to other sites."""

MAX_FORM_BYTES = 64 * 1024
"""The largest label form accepted (a note of a few thousand characters fits many times)."""


def page_headers(*, labelling: bool = False) -> dict[str, str]:
    headers = {**COMMON, "Content-Security-Policy": PAGE_CSP, "X-Frame-Options": "DENY"}
    if labelling:
        headers["Referrer-Policy"] = LABELLING_REFERRER
    return headers


def cross_origin(headers: Mapping[str, str], scheme: str, host: str) -> str | None:
    """Why a state-changing request did not come from the viewer's own pages, or None when it did.

    A browser names the page a POST comes from in ``Origin`` (and, in current browsers, says in
    ``Sec-Fetch-Site`` whether it was the same site); both must name this viewer, at the Host the
    request was sent to (which the Host allow-list already checked). A request without ``Origin``
    is refused too: every browser that can run the viewer sends it with a POST.
    """
    origin = headers.get("origin")
    if origin is None:
        return "the request names no Origin"
    expected = f"{scheme}://{host}".lower()
    if origin.lower() != expected:
        return f"the request comes from {origin!r}, not from this viewer ({expected})"
    site = headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return f"the browser says the request is {site}, not same-origin"
    return None


def token_matches(given: str | None, token: str) -> bool:
    """The form's token against the process's, in constant time."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def artifact_headers(filename: str, *, inline: bool) -> dict[str, str]:
    """Headers for an artifact's bytes: a download unless ``inline``, sandboxed either way."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename.rsplit("/", 1)[-1]) or "artifact"
    disposition = "inline" if inline else "attachment"
    return {
        **COMMON,
        "Content-Security-Policy": ARTIFACT_CSP,
        "X-Frame-Options": "SAMEORIGIN",
        "Content-Disposition": f'{disposition}; filename="{safe[:100]}"',
    }


def is_local(host: str) -> bool:
    return host in LOCAL_HOSTS
