"""Preprocessor type aliases: the short names an eval file may use instead of a MIME type.

The table is AgentV's ``MIME_TYPE_ALIASES`` (agentv-formats.md §3.1). Converters are matched on the
normalized media type only, so both the configured ``type`` and a file block's ``media_type`` go
through :func:`normalize_media_type` before they are compared.
"""

from __future__ import annotations

MIME_TYPE_ALIASES: dict[str, str] = {
    "csv": "text/csv",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "htm": "text/html",
    "html": "text/html",
    "json": "application/json",
    "markdown": "text/markdown",
    "md": "text/markdown",
    "pdf": "application/pdf",
    "sql": "application/sql",
    "txt": "text/plain",
    "xhtml": "application/xhtml+xml",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "xml": "application/xml",
    "yaml": "application/yaml",
    "yml": "application/yaml",
}


def normalize_media_type(value: str) -> str:
    """Lower-cased, trimmed MIME type; an alias maps to its MIME type, anything else is taken literally."""
    key = value.strip().lower()
    return MIME_TYPE_ALIASES.get(key, key)


def alias_of(media_type: str) -> str | None:
    """The short name a MIME type is usually written as (``xlsx``), if it has one."""
    aliases = [alias for alias, mime in MIME_TYPE_ALIASES.items() if mime == media_type]
    subtype = media_type.rpartition("/")[2]
    return subtype if subtype in aliases else next(iter(aliases), None)
