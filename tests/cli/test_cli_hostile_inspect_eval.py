"""Hostile Inspect ``.eval`` logs (the committed fixture rewritten with ``zipfile``): each is refused in one
line, exit 2, nothing in the store, and memory bounded by what the zip's directory declares."""

from __future__ import annotations

import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fixture_paths import FIXTURES_DIR

from evalstore import cli

LOG = FIXTURES_DIR / "inspect" / "logs" / "capitals.eval"
SAMPLE = "samples/1_epoch_1.json"


@pytest.fixture(autouse=True)
def _zstd() -> None:
    pytest.importorskip("inspect_ai")
    import inspect_ai._util.zipfile  # noqa: F401  # the fixture's members are zstd: this teaches zipfile it


def rewrite(dst: Path, members: dict[str, bytes | None] | None = None, method: int = zipfile.ZIP_DEFLATED) -> Path:
    """The fixture with ``members`` replaced (None: left out), every member compressed with ``method``."""
    members = members or {}
    with zipfile.ZipFile(LOG) as src, zipfile.ZipFile(dst, "w") as out:
        for name in src.namelist():
            data = members.get(name, src.read(name))
            if data is not None:
                out.writestr(name, data, compress_type=method)
    return dst


def patch_member(path: Path, member: str, *, size: int | None = None, method: int | None = None) -> None:
    """``member``'s declared uncompressed size or compression method set in both its local header and the
    zip's directory, as a hostile writer could."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    for signature, name_at, name_len_at, size_at, method_at in (
        (b"PK\x03\x04", 30, 26, 22, 8),
        (b"PK\x01\x02", 46, 28, 24, 10),
    ):
        at = data.find(signature)
        while at != -1:
            length = struct.unpack_from("<H", data, at + name_len_at)[0]
            if data[at + name_at : at + name_at + length] == name:
                if size is not None:
                    struct.pack_into("<I", data, at + size_at, size)
                if method is not None:
                    struct.pack_into("<H", data, at + method_at, method)
            at = data.find(signature, at + 4)
    path.write_bytes(data)


def inflating(dst: Path, member: str, megabytes: int) -> Path:
    """The fixture with ``member`` a JSON string that inflates to ``megabytes`` MB (a few hundred KB stored)."""
    with zipfile.ZipFile(LOG) as src, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
        for name in src.namelist():
            if name != member:
                out.writestr(name, src.read(name))
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo's own default stores it as it is
            with out.open(info, "w") as w:
                w.write(b'{"x": "')
                for _ in range(megabytes):
                    w.write(b"a" * (1 << 20))
                w.write(b'"}')
    return dst


def refused(tmp_path: Path, log: Path, env: dict[str, str] | None = None) -> str:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result: Result = CliRunner(env=env).invoke(cli.main, ["--db", db, "import", str(log), "--json"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "store.db").exists()  # nothing half-imported: the log is refused before a store is made
    return result.stderr.strip()


def test_a_member_declaring_more_than_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    log = rewrite(tmp_path / "big.eval")
    error = refused(tmp_path, log, env={"EVALSTORE_MAX_FILE_BYTES": "5000"})
    assert f"big.eval: its member '{SAMPLE}' inflates to" in error
    assert "more than an import reads (5000); set EVALSTORE_MAX_FILE_BYTES to raise the cap" in error


def test_a_sample_inflating_past_its_declared_size_is_read_a_step_at_a_time(tmp_path: Path) -> None:
    from evalstore.replay.inspect.reading import read_member

    def peak(log: zipfile.ZipFile) -> int:
        tracemalloc.start()
        try:
            with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
                read_member(log, SAMPLE)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    path = inflating(tmp_path / "lie.eval", SAMPLE, 64)
    patch_member(path, SAMPLE, size=100)
    with zipfile.ZipFile(path) as log:
        # ZipFile.read inflated all 64 MB before cutting it to the 100 bytes declared
        assert peak(log) < 8 << 20


def test_a_header_inflating_past_its_declared_size_is_refused_before_inspect_ai_reads_it(tmp_path: Path) -> None:
    # inspect_ai reads the header whole whatever its declared size: 4.8 GB of RSS for 1.5 GB
    path = inflating(tmp_path / "lie.eval", "header.json", 16)
    patch_member(path, "header.json", size=100)
    assert refused(tmp_path, path).endswith(
        "lie.eval: not an Inspect AI log inspect_ai can read ('header.json': Bad CRC-32 for file 'header.json')"
    )


@pytest.mark.parametrize(
    ("sample", "reason"),
    [
        (b"not json {", "Expecting value"),
        (b"[" * 100_000 + b"]" * 100_000, "maximum recursion depth exceeded"),
        (b'{"id": 1, "epoch": 1, "n": ' + b"9" * 5000 + b"}", "an integer of more than 4300 digits"),
    ],
    ids=["not-json", "nested-100k", "long-integer"],
)
def test_a_sample_that_is_not_json_inspect_reads_names_its_member(tmp_path: Path, sample: bytes, reason: str) -> None:
    error = refused(tmp_path, rewrite(tmp_path / "bad.eval", {SAMPLE: sample}))
    assert f"bad.eval: not an Inspect AI log inspect_ai can read ('{SAMPLE}': {reason}" in error


def test_a_sample_compressed_as_zipfile_cannot_read_goes_to_inspect_ai_s_reader(tmp_path: Path) -> None:
    path = rewrite(tmp_path / "ppmd.eval", method=zipfile.ZIP_STORED)
    patch_member(path, SAMPLE, method=98)  # PPMd: neither reader knows it
    # inspect_ai's own words: the fallback was taken (zipfile's NotImplementedError, a RuntimeError, was
    # refused as the log's error before it could reach the fallback)
    assert refused(tmp_path, path).endswith("(Unsupported compression method: 98)")


def test_a_sample_inflating_past_the_document_cap_is_refused_without_a_setting(tmp_path: Path) -> None:
    """A JSON member is parsed whole: 300 MB of it (a few hundred KB in the log) would take a gigabyte or
    more, so members are capped at 256 MiB unless EVALSTORE_MAX_FILE_BYTES says otherwise."""
    log = inflating(tmp_path / "big.eval", SAMPLE, 300)
    assert log.stat().st_size < 2 << 20
    error = refused(tmp_path, log)
    assert (
        f"big.eval: its member '{SAMPLE}' inflates to 314572809 bytes, more than an import reads (268435456)" in error
    )
