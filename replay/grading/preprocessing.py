"""From the agent's last message to the answer text graders see, files included.

AgentV hands graders only the text blocks of the last assistant message, so an agent whose answer is
a file (a ContentFile block: ``report.xlsx``) is graded as if it said nothing; it converts files for its
LLM graders only (seed 000's preprocessors). Here too: LLM graders and rubrics get every file block as
text (:func:`prepare_answer`); code and deterministic graders get the text answer, unless they declare
converters of their own (:func:`answer_for`). A converted file becomes text this way: a configured
converter for its media type wins, otherwise the bytes are read as UTF-8.
Anything that goes wrong (binary bytes with no converter, a missing file, a converter that fails,
hangs or floods its output) skips that block and leaves a warning line in the answer, so the grader
sees why the file is absent; it never fails the grade.

Every conversion is recorded as a ``PreprocessingRecorded`` event with a fingerprint over everything the
converter is given (:func:`conversion_fingerprint`: the file's bytes, the path and name it sees, argv,
script, working folder and environment). A later grade with the same fingerprint reuses the recorded
output instead of running the converter again (unless ``no_cache``), and records an event of its own
pointing at the one it reused, so each verdict links to events of its own run.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evalstore.replay.content import FileBlock, ImageBlock, TextBlock, candidate_message
from evalstore.replay.evalfile.aliases import normalize_media_type
from evalstore.replay.evalfile.specs import ConverterSpec
from evalstore.replay.grading.answer import (
    assemble,
    converter_text,
    file_part,
    file_text,
    one_line,
    text_answer,
    warning_line,
)
from evalstore.replay.grading.graders.base import GradingContext
from evalstore.replay.grading.graders.process_cache import cache_environment
from evalstore.replay.grading.materialize import LoadedFile, PrivateTempDir, load_file, safe_basename
from evalstore.replay.processes.children import ChildResult, child_environment, run_child
from evalstore.store.codec import digest_json, sha256_hex
from evalstore.store.errors import BlobNotFound
from evalstore.store.events import PreprocessingRecorded

STDERR_KEEP_CHARS = 4_000
"""How much converter stderr an event keeps (the end)."""

BINARY_WITHOUT_CONVERTER = "default UTF-8 read produced binary or invalid text; configure a preprocessor"


@dataclass
class PreparedAnswer:
    text: str
    """The candidate answer every grader uses as ``output``."""
    warnings: list[str] = field(default_factory=list)
    """One ``[file preprocessing warning] ...`` line per file that could not become text."""
    preprocessing_event_ids: list[str] = field(default_factory=list)


@dataclass
class _FileOutcome:
    event_id: str
    text: str | None
    reason: str | None = None


def answer_for(ctx: GradingContext, converters: list[ConverterSpec]) -> PreparedAnswer:
    """What a code or deterministic grader reads as the answer: AgentV's text answer (files left out,
    as AgentV hands its graders only the text), or, for a grader that declared ``preprocessors:`` of its own
    (an evalstore extension: ``converters`` is then not empty), the answer with its files converted."""
    if converters:
        return prepare_answer(ctx, converters)
    return PreparedAnswer(text=text_answer(ctx.transcript.messages, ctx.transcript.output_text))


def prepare_answer(ctx: GradingContext, converters: list[ConverterSpec]) -> PreparedAnswer:
    """The candidate answer text, with file blocks converted and failures noted."""
    message = candidate_message(ctx.transcript.messages)
    if message is None:
        return PreparedAnswer(text=ctx.transcript.output_text or "")
    if isinstance(message.content, str):
        return PreparedAnswer(text=message.content)

    parts: list[str] = []
    warnings: list[str] = []
    event_ids: list[str] = []
    for block in message.blocks():
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, FileBlock):
            outcome = _file_text(ctx, block, converters)
            event_ids.append(outcome.event_id)
            if outcome.text is not None:
                parts.append(file_part(block.path, outcome.text))
            else:
                warnings.append(warning_line(block.path, block.media_type, outcome.reason or "not evaluable"))
        elif isinstance(block, ImageBlock):
            continue  # images go to multimodal judges separately, never into the answer text
    return PreparedAnswer(text=assemble(parts, warnings), warnings=warnings, preprocessing_event_ids=event_ids)


def select_converter(converters: list[ConverterSpec], media_type: str | None) -> ConverterSpec | None:
    """The first converter whose normalized type matches the block's normalized media type."""
    if not media_type:
        return None
    wanted = normalize_media_type(media_type)
    for converter in converters:
        if normalize_media_type(converter.media_type or converter.type) == wanted:
            return converter
    return None


FINGERPRINT_VERSION = "conversion-v2"
"""In a converter's fingerprint: v1 keyed bytes, argv and script only, and reused the conversion of a file
with the same bytes under another path for a converter that writes its path into its output."""


def conversion_fingerprint(
    artifact_sha256: str | None,
    argv: list[str] | None,
    script_sha256: str | None,
    *,
    stdin: bytes = b"",
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The reuse key: a conversion stands in for another only when the converter was given the same
    things, as a code grader's execution is reused (``process_cache``): the file's bytes, argv and the
    script's bytes, the stdin payload (the path and name it sees; the private folder written ``$TMP``),
    the working folder and the environment (less secrets and a shell's bookkeeping). A file read as text
    (no converter) is keyed by its bytes alone: nothing else reaches the text."""
    if argv is None:
        return digest_json({"artifact_sha256": artifact_sha256, "argv": None, "script_sha256": script_sha256})
    return digest_json(
        {
            "key": FINGERPRINT_VERSION,
            "artifact_sha256": artifact_sha256,
            "argv": argv,
            "script_sha256": script_sha256,
            "stdin_sha256": sha256_hex(stdin),
            "cwd": cwd,
            "env": sorted(cache_environment(env or {}).items()),
        }
    )


_TMP = "$TMP"
"""The private folder a converter's copy of the file lies in, as its fingerprint names it."""


def _converter_stdin(copy: str, block: FileBlock) -> bytes:
    """What a converter reads on stdin: where its copy is, the path the agent gave, the media type."""
    payload = {"path": copy, "original_path": block.path, "media_type": block.media_type}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _copy_path(folder: str, block: FileBlock) -> str:
    """Where ``PrivateTempDir.write`` puts a conversion's one copy of the file."""
    return str(Path(folder) / "f1" / safe_basename(block.path))


def _converter_cwd(ctx: GradingContext) -> str | None:
    suite_dir = ctx.suite.directory
    return str(suite_dir) if suite_dir.is_dir() else None


def _converter_env(ctx: GradingContext) -> dict[str, str]:
    """The converter's environment: the run's or replay's, less evalstore's own settings (as code graders')."""
    key = ("converter env",)
    env = ctx.shared.get(key)
    if env is None:
        env = ctx.shared[key] = child_environment(ctx.options.environment)
    return env


_SETTLED_S = 2.0
"""A file last changed longer ago than this has a digest worth keeping: any later write gives it a newer
modification time (a write within the clock's granularity of the one read could not be told apart)."""
_digests: dict[str, tuple[tuple[int, ...], str]] = {}
_digests_lock = threading.Lock()


def script_digest(argv: list[str]) -> str | None:
    """Digest of the file the command runs (its last argv element), when that is a readable file.

    Kept per path while the file's inode, size and change times stay the same: a replay asks for the
    same few scripts once per grader execution, and reading and hashing them each time was a measurable
    part of a replay whose executions are all reused."""
    if not argv:
        return None
    path = argv[-1]
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with _digests_lock:
            kept = _digests.get(path)
        if kept is not None and kept[0] == signature:
            return kept[1]
        digest = sha256_hex(Path(path).read_bytes())
    except OSError:
        return None
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_S * 1e9:
        with _digests_lock:
            _digests[path] = (signature, digest)
    return digest


def _file_text(ctx: GradingContext, block: FileBlock, converters: list[ConverterSpec]) -> _FileOutcome:
    converter = select_converter(converters, block.media_type)
    argv = list(converter.command) if converter else None
    script_sha = script_digest(argv) if argv else None
    loaded = load_file(block, ctx.recorder, ctx.transcript.workspace_path)
    fingerprint = conversion_fingerprint(loaded.sha256, argv, script_sha)
    if argv is not None:
        fingerprint = conversion_fingerprint(
            loaded.sha256,
            argv,
            script_sha,
            stdin=_converter_stdin(_copy_path(_TMP, block), block),
            cwd=_converter_cwd(ctx),
            env=_converter_env(ctx),
        )
    event = _Event(ctx, block, converter, argv, script_sha, loaded, fingerprint)

    if loaded.data is None:
        return event.record("not_evaluable", reason=loaded.reason)
    if not ctx.options.no_cache:
        reused = _reuse(ctx, event)
        if reused is not None:
            return reused
    if converter is not None and argv is not None:
        return _convert(event, converter, argv, loaded.data)
    return _read_as_text(event, loaded.data)


def _reuse(ctx: GradingContext, event: _Event) -> _FileOutcome | None:
    found = ctx.recorder.find_conversion(event.fingerprint)
    if found is None or found[1].output_sha256 is None:
        return None
    earlier_id, earlier = found
    try:
        text = ctx.recorder.get_blob(found[1].output_sha256).decode("utf-8")
    except (BlobNotFound, UnicodeDecodeError):
        return None  # the earlier output is unusable: convert again
    return event.record(earlier.status, text=text, reused_from=earlier_id, duration_ms=0.0)


def _read_as_text(event: _Event, data: bytes) -> _FileOutcome:
    started = time.monotonic()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return event.record("not_evaluable", reason=BINARY_WITHOUT_CONVERTER, started=started)
    return event.record("read_as_text", text=file_text(text), started=started)


def _convert(event: _Event, converter: ConverterSpec, argv: list[str], data: bytes) -> _FileOutcome:
    block = event.block
    with PrivateTempDir(prefix="evalstore-convert-") as tmp:
        copy = tmp.write(block.path, data)
        assert str(copy) == _copy_path(str(tmp.path), block), "the fingerprint names the copy's place"
        event.ctx.test_waiting()
        result = run_child(
            argv,
            _converter_stdin(str(copy), block),
            timeout=converter.timeout,
            max_output_bytes=converter.max_output_bytes,
            cwd=_converter_cwd(event.ctx),
            env=_converter_env(event.ctx),
            warm=event.ctx.options.warm,
        )
    stderr = result.stderr_text()
    if result.ok:
        text = converter_text(result.stdout.decode("utf-8", errors="replace"))
        return event.record("converted", text=text, stderr=stderr, duration_ms=result.duration_ms)
    return event.record(
        "failed", reason=_failure_reason(result, converter), stderr=stderr, duration_ms=result.duration_ms
    )


def _failure_reason(result: ChildResult, converter: ConverterSpec) -> str:
    if result.spawn_error:
        return result.spawn_error
    if result.timed_out:
        return f"converter timed out after {converter.timeout:g} s; its process group was killed"
    if result.output_exceeded:
        return f"converter output exceeded {converter.max_output_bytes} bytes; its process group was killed"
    stderr = result.stderr_text().strip()
    return one_line(stderr) if stderr else f"preprocessor exited with code {result.exit_code}"


class _Event:
    """What one file's PreprocessingRecorded event says, gathered before the outcome is known."""

    def __init__(
        self,
        ctx: GradingContext,
        block: FileBlock,
        converter: ConverterSpec | None,
        argv: list[str] | None,
        script_sha: str | None,
        loaded: LoadedFile,
        fingerprint: str,
    ) -> None:
        self.ctx = ctx
        self.block = block
        self.converter = converter
        self.argv = argv
        self.script_sha = script_sha
        self.artifact_sha = loaded.sha256
        self.fingerprint = fingerprint

    def record(
        self,
        status: str,
        *,
        text: str | None = None,
        reason: str | None = None,
        stderr: str | None = None,
        reused_from: str | None = None,
        duration_ms: float | None = None,
        started: float | None = None,
    ) -> _FileOutcome:
        if started is not None:
            duration_ms = round((time.monotonic() - started) * 1000.0, 3)
        output_sha = self.ctx.recorder.put_blob(text.encode("utf-8")) if text is not None else None
        event = PreprocessingRecorded(
            test_id=self.ctx.test.id,
            target=self.ctx.target,
            attempt=self.ctx.attempt,
            path=self.block.path,
            media_type=self.block.media_type,
            artifact_sha256=self.artifact_sha,
            converter_type=self.converter.type if self.converter else None,
            argv=self.argv,
            script_sha256=self.script_sha,
            fingerprint=self.fingerprint,
            output_sha256=output_sha,
            stderr=stderr[-STDERR_KEEP_CHARS:] if stderr else None,
            status=status,  # type: ignore[arg-type]
            reason=reason,
            duration_ms=duration_ms,
            reused_from=reused_from,
        )
        return _FileOutcome(event_id=self.ctx.recorder.record(event), text=text, reason=reason)
