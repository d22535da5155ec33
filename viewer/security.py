"""What keeps a run's content from acting in the viewer: response headers for pages and for artifacts.

Everything a run holds (the agent's answer and files, judge replies, converter output) is untrusted.
Pages escape it (Jinja2 autoescape) and forbid inline scripts and styles and any script not served by the
viewer itself; artifacts are served as downloads, or, for the few kinds shown inline (images, and HTML
in a frame), under a ``sandbox`` policy that gives them an opaque origin with scripts off.
"""

from __future__ import annotations

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


def page_headers() -> dict[str, str]:
    return {**COMMON, "Content-Security-Policy": PAGE_CSP, "X-Frame-Options": "DENY"}


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
