"""Reading AgentV wire files: streamed JSON lines, JSON sidecars, digests, and the legacy camelCase rewrite."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from evalstore.replay import jsontext
from evalstore.replay.errors import ImportFormatError
from evalstore.replay.jsontext import snake_key, to_snake_deep, without_lone_surrogates

_CHUNK = 1 << 20
_LINES_BUFFER = 128 * 1024
"""The buffer a results file's lines are read through: AgentV's rows run to kilobytes each, and through the
default 8 KiB buffer each line took several reads and joins (bench/import.py's 20,000 rubric rows: 0.038 s
against 0.023 s, best of three)."""

# Keys whose values AgentV itself persists without the deep rewrite: the grader's raw request keeps
# ``userPrompt``/``systemPrompt`` (agentv-formats.md 1.1), so a legacy rewrite must not touch them either.
_VERBATIM_KEYS = frozenset({"input"})


FROM_ROW_ASSERTIONS = {"imported_from": "row assertions"}
"""``details`` of the implicit llm-grader verdict made from a row that has only flattened assertions;
export leaves it out of ``scores[]``, as the source row had none. Here, not in ``rows``, so the export
does not load the readers."""


MEMBER_SCORES = "scores"
"""The key of a composite verdict's ``details`` holding its members' results (AgentV's nested ``scores``,
where an export puts them back and an import takes them from). Here, not in the composite grader's
module, so the export does not load the graders (a tenth of its start)."""


TRIALS_ROW_FIELDS = ("trials", "aggregation", "cost_limited")
"""The keys AgentV 4.42.4 adds to the one row of a test with trials (``runEvalCaseWithTrials``), in the order it
writes them, last on the row. An import keeps each among the row's ``row_fields`` as the JSON text AgentV wrote
(``rows.kept_row_fields``: canonical JSON would sort an object's keys), and an export of the imported run
writes that text back (``export.export_row``). Here, not in ``rows``, so the export does not load the readers."""


def from_row_assertions(details: dict[str, Any] | None) -> bool:
    return details == FROM_ROW_ASSERTIONS


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object, or {} for anything else: AgentV files leave optional objects out or null."""
    return value if isinstance(value, dict) else {}


def nonempty_text(value: Any) -> str | None:
    """A non-empty string, or None for anything else (absent, null, "", or a value of the wrong type)."""
    return value if isinstance(value, str) and value else None


def agentv_token_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """An OpenAI-compatible reply's ``usage`` in AgentV's ``token_usage`` shape: ``{input, output, cached?}``."""
    if not usage:
        return None
    out: dict[str, Any] = {}
    if isinstance(usage.get("prompt_tokens"), int):
        out["input"] = usage["prompt_tokens"]
    if isinstance(usage.get("completion_tokens"), int):
        out["output"] = usage["completion_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out["cached"] = details["cached_tokens"]
    return out or None


def is_legacy_camel_row(row: dict[str, Any]) -> bool:
    """A row written before the snake_case boundary: it names its test ``testId``."""
    return "test_id" not in row and "testId" in row


# normalizeResultRow refuses these two camelCase spellings outright rather than aliasing them.
_REFUSED_CAMEL = {"artifactPointers": "artifact_pointers", "fileChangesPath": "file_changes_path"}


def normalise_legacy_row(row: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a camelCase row to snake_case (agentv-formats.md 1.5), keeping grader requests verbatim."""
    for camel, snake in _REFUSED_CAMEL.items():
        if camel in row:
            raise ValueError(f"camelCase {camel!r} is not accepted in result rows; write {snake!r}")
    out: dict[str, Any] = to_snake_deep(row)
    scores = row.get("scores")
    if isinstance(scores, list):
        out["scores"] = [_score_keeping_request(s) for s in scores]
    return out


def _score_keeping_request(score: Any) -> Any:
    if not isinstance(score, dict):
        return score
    out: dict[str, Any] = {}
    for key, value in score.items():
        if key in _VERBATIM_KEYS:
            out[key] = value
        elif key == "scores" and isinstance(value, list):
            out[key] = [_score_keeping_request(s) for s in value]
        else:
            out[snake_key(key)] = to_snake_deep(value)
    return out


_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


UTF16 = "the file is UTF-16 encoded; AgentV writes UTF-8: re-save it as UTF-8 (iconv -f UTF-16 -t UTF-8)"


def utf16(start: bytes) -> bool:
    """Whether a file's first bytes are UTF-16 text: its BOM, or (without one) ASCII with a NUL byte after or
    before each character."""
    if start.startswith(_UTF16_BOMS):
        return True
    head = start[:64]
    return (
        len(head) >= 4
        and (not head[1::2].strip(b"\x00") or not head[0::2].strip(b"\x00"))
        and bool(head.strip(b"\x00"))
    )


def loads(raw: bytes) -> Any:
    """One JSON document from bytes (a UTF-8 BOM is allowed). Raises ValueError with a short reason.
    Read by orjson where it gives the stdlib's value (``jsontext.loads``: 0.3-0.5 s where the stdlib took
    0.7 s, for bench/import.py's 20,000 lines); what orjson refuses, the stdlib reads or reports."""
    if raw.startswith(_UTF16_BOMS):
        raise ValueError(UTF16)
    if b"\x00" in raw:  # json.loads would guess UTF-16 or UTF-32 from them, and say so
        cut = " (a file cut short when its writer stopped?)" if not raw.strip(b"\x00\r\n") else ""
        raise ValueError(f"the line holds NUL bytes, which JSON text never does{cut}")
    try:
        value = jsontext.loads(raw.removeprefix(_BOM))
    except json.JSONDecodeError as exc:
        if b"\n" in raw.rstrip(b"\r\n"):  # a whole file: its line and column
            raise ValueError(f"invalid JSON ({exc})") from exc
        # One line of a JSONL file: the decoder's "line 2 column 1" (past its newline) would read as
        # another line of the file; say where in this one.
        # ("Unterminated string starting at" names its place itself)
        at = "" if exc.msg.endswith(" at") else " at"
        raise ValueError(f"invalid JSON ({exc.msg}{at} character {exc.pos + 1})") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc})") from exc
    except ValueError as exc:  # an integer too long to convert
        raise ValueError(f"invalid JSON ({jsontext.decode_problem(exc)})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    if _SURROGATE_ESCAPE.search(raw):  # rare: JSON.stringify escapes only lone surrogates
        value = without_lone_surrogates(value)
    return value


def iter_json_lines(
    path: Path, span: tuple[int, int, int] | None = None
) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, object, error) for each non-blank line, read one line at a time; with ``span``
    (:func:`line_spans`), of those lines only.

    Exactly one of object and error is set; an error is a short reason such as a truncated line.
    CRLF endings, blank lines and a UTF-8 BOM (Windows editors write one) are accepted.
    """
    start, end, first = span if span is not None else (0, None, 1)
    with path.open("rb", buffering=_LINES_BUFFER) as fh:
        if start == 0 and utf16(fh.read(64)):
            # Refused whole: a line at a time, its lines would split at NUL bytes, some reading as JSON.
            raise ImportFormatError(f"{path}: {UTF16}")
        fh.seek(start)
        lines = iter(fh) if end is None else _until(fh, end - start)
        for number, raw in enumerate(lines, start=first):
            if number == 1:
                raw = raw.removeprefix(_BOM)  # so a BOM alone on the first line counts as blank
            if not raw.strip():
                continue
            try:
                value = loads(raw)
            except ValueError as exc:
                truncated = "; is the line truncated?" if str(exc).startswith("invalid JSON (") else ""
                yield number, None, f"{exc}{truncated}"
                continue
            if not isinstance(value, dict):
                yield number, None, f"expected a JSON object, got {json_type(value)}"
                continue
            yield number, value, None


def json_type(value: Any) -> str:
    """What JSON calls a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def _until(fh: Any, size: int) -> Iterator[bytes]:
    """The lines of an open file's next ``size`` bytes (which end at a line's end)."""
    read = 0
    for raw in fh:
        yield raw
        read += len(raw)
        if read >= size:
            return


def line_spans(path: Path, lines: int) -> list[tuple[int, int, int]]:
    """``path`` cut into parts of about ``lines`` lines each, at line ends: (first byte, end byte, number
    of the first line), for :func:`iter_json_lines`. Newlines are counted in blocks, never split."""
    spans: list[tuple[int, int, int]] = []
    start, first, seen, offset = 0, 1, 0, 0
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            at = 0
            while True:
                # Where this part's last line ends, if it ends in this block.
                wanted = lines - seen
                count = block.count(b"\n", at)
                if count < wanted:
                    seen += count
                    break
                end = at
                for _ in range(wanted):
                    end = block.index(b"\n", end) + 1
                spans.append((start, offset + end, first))
                first += lines
                start, seen, at = offset + end, 0, end
            offset += len(block)
    if offset > start:
        spans.append((start, offset, first))
    return spans


def first_json_row(path: Path) -> dict[str, Any] | None:
    """The first parsable object row, for cheap hints (suite, eval path); None if there is none."""
    for _, row, _ in iter_json_lines(path):
        if row is None:
            continue
        if not is_legacy_camel_row(row):
            return row
        try:
            return normalise_legacy_row(row)
        except ValueError:
            return None  # reported with its line number when the tests are iterated
    return None


def read_json(path: Path) -> Any:
    """A JSON sidecar, or ImportFormatError naming the file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: file not found") from None
    try:
        return loads(raw)
    except ValueError as exc:
        complete = "; is the file complete?" if str(exc).startswith("invalid JSON (") else ""
        raise ImportFormatError(f"{path}: {exc}{complete}") from exc


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(root: Path, files: Iterable[Path] | None = None) -> str:
    """Digest of a directory: each file's relative path and bytes, in sorted path order, streamed."""
    paths = sorted(p for p in (files if files is not None else root.rglob("*")) if p.is_file())
    digest = hashlib.sha256()
    for path in paths:
        rel = path.relative_to(root).as_posix().encode()
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()
