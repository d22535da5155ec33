"""An Inspect AI log's samples read for an import: in the order ``read_eval_log_samples`` gives them,
an ``.eval`` log a chunk of samples at a time through one opened zip.

``inspect_ai``'s own readers go through its async file layer: ``read_eval_log_samples`` opens the zip for
every sample, reading its whole directory each time (10,000 samples: hours), and
``read_eval_log_samples_by_id`` parses the directory once per call and hands each member to a thread (a
10,000-sample log: its directory parsed a hundred times, and most of a sample's reading time spent in the
event loop). :class:`EvalSamples` opens the zip once with the standard library's ``zipfile`` (which
``inspect_ai`` extends with zstd on import) and makes each sample as ``inspect_ai``'s eval recorder does
(``_read_log_sample_impl``: JSON (read by orjson where it gives the same value), ``EvalSample.model_validate`` with the deserializing context, then
``_resolve_sample_for_read``), so a sample is the same ``EvalSample`` either way. Those three are private
names: where they have moved, or a member's compression is one ``zipfile`` cannot read, the samples come
from ``read_eval_log_samples_by_id`` as before.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalstore.replay.agentv.file_access import MAX_FILE_BYTES_ENV, max_document_bytes
from evalstore.replay.errors import ImportFormatError
from evalstore.replay.jsontext import decode_problem, loads

CHUNK_SAMPLES = 100
"""Samples of an ``.eval`` log read and built together (one part for the import's forked workers)."""

Chunk = list[tuple[Any, int]]
"""``(sample id, epoch)`` of the samples of one chunk."""


def read_or_refuse(
    path: Path, read: Callable[[], Any], member: str | None = None, passes: tuple[type[Exception], ...] = ()
) -> Any:
    """What ``read`` gives, or one line saying ``path`` (at its ``member``, where one is being read) is not
    a log Inspect can read; the errors in ``passes`` are raised as they are, for the caller."""
    try:
        return read()
    except passes:
        raise
    except (
        ValueError,
        KeyError,
        TypeError,
        RuntimeError,
        zipfile.BadZipFile,
        UnicodeDecodeError,
        AssertionError,
    ) as exc:
        # AssertionError: inspect_ai's JSON reader asserts what a log holds ("Must encounter a 'eval'").
        if isinstance(exc, ValidationError):
            reason = exc.errors()[0]["msg"]
        elif isinstance(exc, ValueError) and not isinstance(exc, UnicodeDecodeError):
            reason = decode_problem(exc)
        else:
            reason = str(exc) or type(exc).__name__
        reason = (reason.splitlines() or [""])[0]
        raise ImportFormatError(
            f"{path}: not an Inspect AI log inspect_ai can read ({f'{member!r}: ' if member else ''}{reason})"
        ) from None


READ_STEP = 1 << 12
"""A member is read this much at a time: ``ZipFile.read`` inflates it in one step, as much as the data
makes whatever size the zip's directory declares (a sample declared as 100 bytes inflated to 1.5 GB
before ``zipfile`` cut it to 100 and failed its CRC). A step reads at most this much compressed (4 KB,
``zipfile``'s least): deflate then gives at most the step, zstd (whose decompressor takes no bound) at
most what 4 KB can make (~128 MB of runs; 1 MB steps let a zstd header inflate 1 GB, 2.2 GB of RSS).
Some 15 us more a member than one read (19 KB samples)."""


def read_member(log: zipfile.ZipFile, member: str) -> bytes:
    """``log.read(member)`` in steps of :data:`READ_STEP`: in memory, the member's declared size (which
    :func:`check_members` caps; ``zipfile`` stops there, and a member that inflates further fails its CRC)
    and one step."""
    with log.open(member) as f:
        return b"".join(iter(partial(f.read, READ_STEP), b""))


def check_document(path: Path) -> None:
    """Refuse a ``.json`` log larger than :func:`max_document_bytes` before ``inspect_ai`` reads it: the log
    is one JSON document, which its reader parses whole (for each sample it reads), as it parses an
    ``.eval`` log's members (:func:`check_members`)."""
    cap = max_document_bytes()
    size = path.stat().st_size
    if size > cap:
        raise ImportFormatError(
            f"{path}: a JSON log of {size} bytes, more than an import reads whole ({cap}); set "
            f"{MAX_FILE_BYTES_ENV} to raise the cap, or convert it to an .eval log, read a sample at a time "
            "(inspect log convert --to eval)"
        )


def check_members(path: Path) -> None:
    """Refuse an ``.eval`` log before ``inspect_ai`` reads it: a member that declares more than
    :func:`max_document_bytes` (a sample of a few MB that inflates to 3 GB took 6.4 GB of RSS, then a
    MemoryError), or one of the log's own (all but its samples: the header and summaries ``inspect_ai``
    reads whole, however large its directory says they are: 4.8 GB of RSS for a header declared as 100
    bytes) that inflates to more than it declares (read here a step at a time; its CRC fails)."""
    cap = max_document_bytes()
    with read_or_refuse(path, partial(zipfile.ZipFile, path)) as log:
        for info in log.infolist():
            if info.file_size > cap:
                raise ImportFormatError(
                    f"{path}: its member {info.filename!r} inflates to {info.file_size} bytes, more than an "
                    f"import reads ({cap}); set {MAX_FILE_BYTES_ENV} to raise the cap"
                )
        for info in log.infolist():
            if not info.filename.startswith("samples/"):
                # a compression zipfile does not know: inspect_ai's reader says what it makes of it
                with suppress(NotImplementedError):
                    read_or_refuse(
                        path, partial(read_member, log, info.filename), info.filename, (NotImplementedError,)
                    )


def sample_chunks(api: Any, path: Path, header: Any) -> list[Chunk]:
    """An ``.eval`` log's samples as chunks of :data:`CHUNK_SAMPLES`, in the order ``read_eval_log_samples``
    gives them (the dataset's sample ids, each epoch in turn); none for a ``.json`` log, which Inspect
    reads whole."""
    if path.suffix == ".json":
        return []
    dataset = header.eval.dataset
    if dataset.sample_ids is not None:
        keys = [(i, e) for i in dataset.sample_ids for e in range(1, (header.eval.config.epochs or 1) + 1)]
    else:  # an older log: its sample summaries say which samples it holds
        keys = [(s.id, s.epoch) for s in read_or_refuse(path, lambda: api.read_eval_log_sample_summaries(str(path)))]
    return [keys[start : start + CHUNK_SAMPLES] for start in range(0, len(keys), CHUNK_SAMPLES)]


def log_samples(api: Any, path: Path, chunks: list[Chunk]) -> Iterator[Any]:
    """The log's samples, one at a time (those the log lacks, as in a cancelled eval, left out): a
    ``.json`` log through ``read_eval_log_samples``, an ``.eval`` log chunk by chunk (:class:`EvalSamples`)."""
    if path.suffix == ".json":
        samples = iter(read_or_refuse(path, lambda: api.read_eval_log_samples(str(path), all_samples_required=False)))
        while (sample := read_or_refuse(path, lambda: next(samples, None))) is not None:
            yield sample
        return
    reader = EvalSamples(api, path)
    try:
        for chunk in chunks:
            yield from reader.chunk(chunk)
    finally:
        reader.close()


def _private_reader() -> tuple[Callable[[Any, int], str], Callable[[bytes], Any]] | None:
    """What ``inspect_ai``'s eval recorder does to read one sample: the member's name, and the sample made
    from its bytes; None where those names have moved (the public reader is used)."""
    try:
        from inspect_ai._util.constants import get_deserializing_context
        from inspect_ai.log import EvalSample
        from inspect_ai.log._file import _resolve_sample_for_read
        from inspect_ai.log._recorders.eval import _sample_filename
    except ImportError:
        return None

    def make(data: bytes) -> Any:
        # jsontext.loads: json.loads's value, read by orjson where that gives the same (NaN, an integer
        # beyond 64 bits: the stdlib). A sample of bench/inspect_log.py parsed and validated in 0.29 ms
        # where json.loads took 0.31 (orjson alone: 0.25; the check for long integers takes the rest)
        sample = EvalSample.model_validate(loads(data), context=get_deserializing_context())
        return _resolve_sample_for_read(sample, False)

    return _sample_filename, make


class EvalSamples:
    """An ``.eval`` log's samples, read through one zip opened for as long as this lives: opened by the
    process that reads (a forked worker opens its own; a shared file offset would mix their reads)."""

    def __init__(self, api: Any, path: Path) -> None:
        self.api, self.path = api, path
        self._private = _private_reader()
        self._zip = read_or_refuse(path, partial(zipfile.ZipFile, path)) if self._private else None
        self._members = frozenset(self._zip.namelist()) if self._zip is not None else frozenset()

    def chunk(self, chunk: Chunk) -> list[Any]:
        """The samples of ``chunk`` the log holds, in its order."""
        if self._zip is None or self._private is None:
            return self._public(chunk)
        name, make = self._private
        found = []
        for sample_id, epoch in chunk:
            member = name(sample_id, epoch)
            if member not in self._members:  # not in the log (a cancelled eval), as the public readers leave it out
                continue
            try:  # NotImplementedError is a RuntimeError: passed, not refused
                data = read_or_refuse(
                    self.path, partial(read_member, self._zip, member), member, (NotImplementedError,)
                )
            except NotImplementedError:  # a compression zipfile does not know: inspect_ai's own reader
                return self._public(chunk)
            found.append(read_or_refuse(self.path, partial(make, data), member))
        return found

    def _public(self, chunk: Chunk) -> list[Any]:
        api, path = self.api, self.path
        try:
            return list(read_or_refuse(path, partial(api.read_eval_log_samples_by_id, str(path), chunk, concurrency=1)))
        except IndexError:  # some of the chunk is not in the log: the others, one by one
            found = []
            for sample_id, epoch in chunk:
                try:
                    found.append(
                        read_or_refuse(path, partial(api.read_eval_log_sample, str(path), id=sample_id, epoch=epoch))
                    )
                except IndexError:
                    continue
            return found

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
