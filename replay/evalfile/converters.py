"""Preprocessor (file→text converter) configuration: suite-level and per-grader ``preprocessors``.

agentv-formats.md §3.2: argv only, and the LAST argv element must resolve through the search roots
to an existing file (the converter script), which is replaced by its absolute path. ``timeout`` and
``max_output_bytes`` are evalstore extensions (AgentV runs converters without either).
"""

from __future__ import annotations

from typing import Any

from evalstore.replay.evalfile.aliases import normalize_media_type
from evalstore.replay.evalfile.fields import (
    ParseContext,
    expect_list,
    expect_mapping,
    opt_number,
    req_str,
    warn_unknown,
)
from evalstore.replay.evalfile.source import Where
from evalstore.replay.evalfile.specs import ConverterSpec

CONVERTER_KEYS = ("type", "command", "timeout", "max_output_bytes")


def parse_converters(raw: Any, where: Where, ctx: ParseContext) -> list[ConverterSpec]:
    """Converters in order; a later entry for the same media type replaces an earlier one."""
    if raw is None:
        return []
    entries = expect_list(raw, where, "a list of {type, command} preprocessors")
    return merge_converters([], [_parse_one(entry, where.index(i), ctx) for i, entry in enumerate(entries)])


def merge_converters(base: list[ConverterSpec], overrides: list[ConverterSpec]) -> list[ConverterSpec]:
    """Keyed by normalized media type: an override replaces the base entry in place, or is appended."""
    merged: dict[str, ConverterSpec] = {c.media_type: c for c in base}
    for converter in overrides:
        merged[converter.media_type] = converter
    return list(merged.values())


def _parse_one(entry: Any, where: Where, ctx: ParseContext) -> ConverterSpec:
    obj = expect_mapping(entry, where, "a preprocessor {type, command}")
    warn_unknown(ctx, obj, CONVERTER_KEYS, where)
    type_ = req_str(obj, "type", where, "name the media type (e.g. xlsx or application/pdf)")
    command = obj.get("command")
    cmd_where = where.key("command")
    if isinstance(command, str):
        raise cmd_where.error('must be an argv list, not a string; write e.g. ["python3", "convert.py"]')
    if not isinstance(command, list) or not command:
        raise cmd_where.error('is required: a non-empty argv list such as ["python3", "convert.py"]')
    for i, part in enumerate(command):
        if not isinstance(part, str) or not part.strip():
            raise cmd_where.index(i).error("argv elements must be non-empty strings")
    script_ref = command[-1]
    script = ctx.resolve(script_ref, cmd_where.index(len(command) - 1), "preprocessor command file")
    ctx.reference("converter", script, script_ref)
    timeout = opt_number(obj, "timeout", where, low=0.0, low_open=True)
    max_bytes = opt_number(obj, "max_output_bytes", where, low=0.0, low_open=True)
    fields: dict[str, Any] = {}
    if timeout is not None:
        fields["timeout"] = timeout
    if max_bytes is not None:
        if max_bytes != int(max_bytes):
            raise where.key("max_output_bytes").error("expected a whole number of bytes")
        fields["max_output_bytes"] = int(max_bytes)
    return ConverterSpec(
        type=type_, media_type=normalize_media_type(type_), command=[*command[:-1], str(script)], **fields
    )
