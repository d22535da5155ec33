"""Which AgentV result layout a path holds, and the one entry point that opens any of them."""

from __future__ import annotations

from pathlib import Path

from evalstore.replay.agentv.jsonl import FORMAT as JSONL_FORMAT
from evalstore.replay.agentv.jsonl import read_jsonl
from evalstore.replay.agentv.records import ImportSource
from evalstore.replay.agentv.v4_run import FORMAT as V4_FORMAT
from evalstore.replay.agentv.v4_run import INDEX as V4_INDEX
from evalstore.replay.agentv.v4_run import read_v4_run
from evalstore.replay.agentv.v5_bundle import FORMAT as V5_FORMAT
from evalstore.replay.agentv.v5_bundle import case_dirs, read_v5_bundle
from evalstore.replay.agentv.wire import UTF16, utf16
from evalstore.replay.errors import ImportFormatError

FORMATS = (V4_FORMAT, V5_FORMAT, JSONL_FORMAT)


def _directory_format(root: Path) -> str | None:
    if (root / ".internal" / "index.jsonl").is_file():
        return V5_FORMAT
    if case_dirs(root):
        return V5_FORMAT  # sample-N folders are v5-only, whichever index the run kept
    if (root / V4_INDEX).is_file():
        return V4_FORMAT
    return None


RUNS_DEPTH = 3
"""How far below a folder its AgentV runs are looked for: ``.agentv/results`` holds ``runs/<experiment>/<run>``
(v4) and v5-next bundles, ``runs`` an experiment folder each, an experiment folder (``runs/default``) its runs."""


def run_folders(path: Path) -> list[Path]:
    """The AgentV runs a folder that is none holds (AgentV's results folder, an experiment's folder of
    timestamped runs), found up to :data:`RUNS_DEPTH` folders down, never inside a run nor a hidden folder;
    in name order, which for AgentV's timestamped names is the order they ran in."""
    found: list[Path] = []
    level = [path]
    for _ in range(RUNS_DEPTH):
        below: list[Path] = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError:
                continue
            for child in children:
                (found if _directory_format(child) is not None else below).append(child)
        level = below
    return sorted(found, key=lambda p: (p.name, str(p)))


def rows_inside(path: Path) -> bool:
    """Whether a file named otherwise (``results.ndjson``, ``run.agentv-jsonl``, no suffix) holds result
    rows: its first line opens a JSON object. A ``.json`` or ``.eval`` file is an Inspect log's name, which
    ``import`` and ``validate`` never ask about; a wrong row is the reader's to name, with its line."""
    return _rows(_start(path))


def _rows(start: bytes | None) -> bool:
    return start is None or start.lstrip().startswith(b"{")


def _start(path: Path) -> bytes | None:
    """The file's first 4 KiB, past a UTF-8 BOM; None when it cannot be read (the reader says why)."""
    try:
        with path.open("rb") as fh:
            return fh.read(4096).removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return None


def _one_document(start: bytes | None) -> bool:
    """Whether a file that starts so is one JSON object written over several lines (its first line a ``{``
    alone), as Inspect writes a ``.json`` log, not rows of one object a line."""
    lines = (start or b"").splitlines()
    first = next((line.strip() for line in lines if line.strip()), b"")
    return first == b"{" and len(lines) > 1


def detect_format(path: Path) -> str:
    """One of FORMATS, or ImportFormatError saying what was expected."""
    if path.is_dir():
        found = _directory_format(path)
        if found is None:
            raise ImportFormatError(
                f"{path}: not an AgentV result directory: expected index.jsonl (v4 run), summary.json with "
                ".internal/index.jsonl or <case>/sample-N/ folders (v5 bundle); or pass a results .jsonl file "
                "(nor a folder of Inspect AI logs: .eval or .json files)"
            )
        return found
    if path.is_file():
        if path.name == "index.jsonl":
            # An index inside a run directory means the run directory, with its sidecars.
            root = path.parent.parent if path.parent.name == ".internal" else path.parent
            found = _directory_format(root)
            if found is not None:
                return found
        start = _start(path)
        if start is not None and utf16(start):
            raise ImportFormatError(f"{path}: {UTF16}")
        if _one_document(start):
            raise ImportFormatError(
                f"{path}: one JSON document over several lines, not result rows (one JSON object a line); an "
                "Inspect AI log is read as one when it is named .json or .eval"
            )
        if path.suffix == ".jsonl" or _rows(start):
            return JSONL_FORMAT
        raise ImportFormatError(
            f"{path}: not an AgentV results file: expected a .jsonl file of result rows (one JSON object a line)"
        )
    if path.exists():  # a FIFO, a device: reading it could wait for ever or never end
        raise ImportFormatError(f"{path}: not a regular file or a folder; import a results file or a run folder")
    raise ImportFormatError(f"{path}: no such file or directory")


def read_results(path: Path, fmt: str) -> ImportSource:
    """Open ``path`` as ``fmt`` (see detect_format); tests are read only when iterated."""
    readers = {V4_FORMAT: read_v4_run, V5_FORMAT: read_v5_bundle, JSONL_FORMAT: read_jsonl}
    if fmt not in readers:
        raise ImportFormatError(f"unknown AgentV result format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not path.exists():
        raise ImportFormatError(f"{path}: no such file or directory")
    return readers[fmt](path)
