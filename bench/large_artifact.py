"""Peak memory of importing, verifying, auditing and exporting one large artifact (issue 29 item 11).

Run: ``.venv/bin/python bench/large_artifact.py [--mb 1024] [--db URL] [--python PYTHON] [--dir DIR]``.

It writes a file of ``--mb`` MiB (random bytes: zlib gains nothing, the worst case for time, as most
binary artifacts are) and an AgentV 4.x results row whose answer names it, then runs, each as a child
process of its own (``python -m evalstore``): ``import`` of the row into a fresh store (SQLite in DIR, or
``--db``: a PostgreSQL URL, whose schema is emptied first), ``verify``, ``audit`` of the test and
``export --format bundle``. For each it prints the wall time and the child's peak RSS (``ru_maxrss`` of
a wrapper that waits for it, so only that child counts), and the store's size on SQLite.

``--python`` runs another checkout's interpreter (``/work/main/.venv/bin/python``: the code before
blobs were streamed) for the "before" figures; the cap (``EVALSTORE_MAX_FILE_BYTES``) is raised past the
file's size for both. A commit that held the file whole peaked at about twice its size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRAPPER = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(done.returncode, peak, repr(done.stderr.strip().splitlines()[-1:]))\n"
)


def measure(python: str, args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MiB, exit code, last stderr line) of ``python -m evalstore ARGS``."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, python, "-m", "evalstore", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=3600,
        check=True,
    ).stdout.split(" ", 2)
    return time.perf_counter() - started, int(out[1]) / 1024, int(out[0]), out[2].strip()


def write_artifact(path: Path, mib: int) -> None:
    with path.open("wb") as fh:
        for _ in range(mib):
            fh.write(os.urandom(1024 * 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="the artifact's size in MiB")
    parser.add_argument("--db", help="a store URL (default: a new SQLite file in DIR)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose evalstore runs")
    parser.add_argument("--dir", help="where the files go (default: a temporary folder)")
    args = parser.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="evalstore-large-"))
    folder.mkdir(parents=True, exist_ok=True)
    artifact = folder / "artifact.bin"
    if not artifact.exists() or artifact.stat().st_size != args.mb * 1024 * 1024:
        write_artifact(artifact, args.mb)
    row = {
        "timestamp": "2026-11-28T12:00:00.000Z",
        "test_id": "large",
        "suite": "large-artifact",
        "score": 1.0,
        "target": "default",
        "scores": [],
        "output": [{"role": "assistant", "content": [{"type": "file", "path": str(artifact)}]}],
    }
    (folder / "results.jsonl").write_text(json.dumps(row) + "\n")
    db_file = folder / "store.db"
    for leftover in folder.glob("store.db*"):
        leftover.unlink()
    bundle = folder / "bundle"
    shutil.rmtree(bundle, ignore_errors=True)
    url = args.db or f"sqlite:///{db_file}"
    if url.startswith("postgresql"):
        from sqlalchemy import create_engine, text

        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
    env = {**os.environ, "EVALSTORE_MAX_FILE_BYTES": str(args.mb * 1024 * 1024 + 1), "EVALSTORE_DB": url}
    print(f"artifact {args.mb} MiB, store {url.split('@')[-1]}, evalstore from {args.python}")
    steps = [
        ("import", ["import", str(folder / "results.jsonl"), "--json"]),
        ("verify", ["verify"]),
        ("audit", ["audit", "last", "large"]),
        ("export bundle", ["export", "last", "--format", "bundle", "-o", str(bundle)]),
    ]
    for name, step in steps:
        seconds, peak, code, last = measure(args.python, step, env, folder)
        print(f"  {name:14s} exit {code}  {seconds:7.1f} s  peak RSS {peak:8.1f} MiB  {last}")
    if db_file.exists():
        size = sum(f.stat().st_size for f in folder.glob("store.db*")) / 1024 / 1024
        print(f"  store on disk  {size:.1f} MiB (WAL included)")


if __name__ == "__main__":
    main()
