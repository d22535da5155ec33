"""An Inspect AI log of N samples in and out: the store's size against the log's, and the export's memory.

Run: ``.venv/bin/python bench/inspect_log.py [--samples 10000] [--small 1000] [--dir DIR]`` (needs
``inspect_ai``: ``pip install 'evalstore[inspect]'``).

Setup (not measured): a ``.eval`` log of N samples made from the samples of
``tests/fixtures/inspect/logs/arithmetic.eval`` that did not error (each with its events, as
``inspect eval`` wrote them), every copy's question given ~300 characters of its own, so no two samples
share their text (a question over 100 characters is an attachment of the sample, as Inspect condenses
it), written by ``inspect_ai.log.write_eval_log``.

Then, each as ``python -m evalstore`` in a child process: ``import`` (seconds, samples a second, the CPU of
its process tree (user + system, its forked workers included), peak RSS), against three floors: the data
floor, unzipping every sample member of the log and ``json.loads`` of each (the Inspect analogue of
bench/import.py's ``json.loads`` of every line; also with ``orjson.loads``), in this process, best of
three; ``inspect_ai.log.read_eval_log`` of the same log in a child process (Inspect reading and
validating every sample and nothing else, holding the log whole; Python's start and imports included in
both); and, for a log of at most :data:`SAMPLES_READ_MAX` samples, ``read_eval_log_samples`` in a child
process (Inspect's own sample-by-sample reader, which opens the zip again for every sample: quadratic in
the samples). The target line: the import's wall time within 12.5x the data floor (issue 31's import
target, >= 4,000 rows/s where ``json.loads`` of 20,000 rows takes 0.40 s). Then the store's size
(``.db`` + ``-wal``) against the log's and the store's pages by part (events and their payloads by
type, blobs by what names them, projections), a ``replay`` with a suite-level deterministic grader, and
``export --format inspect`` of the imported run and of the replay (seconds, peak RSS: the child's
``VmHWM``). A log already in ``--dir`` is used again. With ``--small M``, the same for a log of M samples first: an export whose memory is flat in
the number of samples peaks at about the same RSS for both.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

# ``python bench/X.py`` puts bench/ first on sys.path, where bench/replay.py would shadow the package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from bench.read import run_child  # noqa: E402
from bench.store_size import store_bytes, table_pages  # noqa: E402
from evalstore.store import EventStore  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "inspect" / "logs" / "arithmetic.eval"
SAMPLES_READ_MAX = 2000
"""The largest log whose ``read_eval_log_samples`` floor is measured (10,000 samples: some 300 s)."""
IMPORT_TARGET = 12.5
"""The import's wall time as a multiple of the data floor it must stay within (bench/import.py's target)."""
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma tau upsilon omega".split()  # noqa: SIM905
SUITE = """name: bench-regrade
assertions:
  - name: digits
    type: regex
    value: "[0-9]+"
"""


def make_log(path: Path, n: int, seed: int = 7) -> None:
    """``n`` samples copied from the fixture's, each with a question of its own."""
    from inspect_ai.log import EvalSample, read_eval_log, recompute_metrics, write_eval_log

    rng = random.Random(seed)
    log = read_eval_log(FIXTURE)
    bases = [s for s in log.samples or [] if s.error is None and s.epoch == 1]
    samples = []
    for i in range(n):
        base = bases[i % len(bases)]
        question = base.input if isinstance(base.input, str) else ""
        own = f"{question} (case {i}: {' '.join(rng.choice(WORDS) for _ in range(45))})"
        text = base.model_dump_json().replace(json.dumps(question)[1:-1], json.dumps(own)[1:-1])
        record = json.loads(text)
        record.update(id=f"{base.id}-{i}", epoch=1, uuid=uuid.uuid4().hex)
        samples.append(EvalSample.model_validate(record))
    log.samples = samples
    log.eval.config.epochs = 1
    log.eval.dataset.samples = n
    log.eval.dataset.sample_ids = [s.id for s in samples]
    recompute_metrics(log)
    write_eval_log(log, str(path))


def breakdown(db: Path) -> dict[str, int]:
    """Bytes per part of the store: pages of each table with its indexes (``dbstat``), the event payloads
    by type, the blobs' stored bytes by what names them."""
    con = sqlite3.connect(db)
    try:
        parts = {f"pages {table}": size for table, size in table_pages(con).items()}
        store = EventStore.open(f"sqlite:///{db}")
        transcripts = []
        for ev in store.read_all():  # the payloads are inside the log's compressed records
            key = f"payloads {ev.type}"
            parts[key] = parts.get(key, 0) + len(ev.payload_json.encode())
            if ev.type == "transcript_recorded":
                transcripts.append(ev.payload_json)
        store.close()
        named: dict[str, str] = {}
        for payload in transcripts:
            t = json.loads(payload)
            if t.get("source_record_sha256"):
                named[t["source_record_sha256"]] = "sample record"
            for name in ("messages_sha256", "events_sha256"):
                if t.get(name):
                    named[t[name]] = name.removesuffix("_sha256")
            for a in t.get("attachments") or []:
                named.setdefault(a["sha256"], "attachment")
        for digest, size in con.execute("SELECT sha256, LENGTH(data) FROM blobs"):
            key = f"blobs {named.get(digest, 'other')}"
            parts[key] = parts.get(key, 0) + size
        return dict(sorted(parts.items(), key=lambda kv: -kv[1]))
    finally:
        con.close()


def measure(workdir: Path, n: int) -> dict[str, float]:
    log = workdir / f"bench-{n}.eval"
    started = time.perf_counter()
    if not log.exists():  # a log made by an earlier run in --dir is used again (making one takes minutes)
        make_log(log, n)
    print(
        f"[{n}] made {log.name} ({log.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    db = workdir / f"store-{n}.db"
    for old in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        old.unlink(missing_ok=True)
    before = _children_cpu()
    secs, rss = run_child(["import", str(log), "--json"], str(db))
    cpu = _children_cpu() - before
    imported = _last_run(db)
    figures = {"log_mb": log.stat().st_size / 1e6, "import_s": secs, "import_cpu_s": cpu, "import_rss_mb": rss}
    figures["import_samples_per_s"] = n / secs
    for name, (floor_wall, floor_cpu) in data_floor(log).items():
        figures[f"floor_unzip_{name}_s"] = floor_wall
        figures[f"import_over_{name}_floor"] = secs / floor_wall
        figures[f"import_cpu_over_{name}_floor_cpu"] = cpu / floor_cpu
    figures["floor_read_eval_log_s"] = read_floor(log)
    figures["import_over_read_eval_log"] = secs / figures["floor_read_eval_log_s"]
    if n <= SAMPLES_READ_MAX:
        figures["floor_read_eval_log_samples_s"] = read_floor(log, samples=True)
        figures["import_over_read_eval_log_samples"] = secs / figures["floor_read_eval_log_samples_s"]
    within = secs / figures["floor_unzip_json_s"]
    print(
        f"[{n}] import {n / secs:.0f} samples/s, {within:.1f}x the data floor (json.loads of every sample): "
        f"target within {IMPORT_TARGET}x: {'met' if within <= IMPORT_TARGET else 'MISSED'}"
    )
    figures["store_mb"] = store_bytes(db) / 1e6
    figures["store_over_log"] = figures["store_mb"] / figures["log_mb"]
    parts = breakdown(db)
    suite = workdir / "regrade.eval.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    figures["replay_s"], figures["replay_rss_mb"] = run_child(
        ["replay", imported, "--eval", str(suite), "--json"], str(db)
    )
    replay = _last_run(db)
    for name, run in (("export_import", imported), ("export_replay", replay)):
        out = workdir / f"{name}-{n}.eval"
        figures[f"{name}_s"], figures[f"{name}_rss_mb"] = run_child(
            ["export", run, "--format", "inspect", "-o", str(out)], str(db)
        )
        figures[f"{name}_mb"] = out.stat().st_size / 1e6
    print(f"[{n}] store parts (MB):", file=sys.stderr)
    for part, size in parts.items():
        print(f"    {part:40} {size / 1e6:8.2f}")
    return figures


def _children_cpu() -> float:
    """User + system seconds of this process's finished children (and theirs, once waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def data_floor(log: Path) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds, best of three, of unzipping every sample member of the log and parsing it,
    with ``json.loads`` and with ``orjson.loads``: what reading the log's data takes, with no model."""
    import zipfile

    import inspect_ai.log  # noqa: F401  (zstd members: inspect_ai adds zstd to zipfile on import)
    import orjson

    out = {}
    for name, loads in (("json", json.loads), ("orjson", orjson.loads)):
        best = (float("inf"), float("inf"))
        for _ in range(3):
            started, cpu = time.perf_counter(), time.process_time()
            with zipfile.ZipFile(log) as archive:
                for info in archive.infolist():
                    if info.filename.startswith("samples/"):
                        loads(archive.read(info))
            best = min(best, (time.perf_counter() - started, time.process_time() - cpu))
        out[name] = best
    return out


def read_floor(log: Path, samples: bool = False) -> float:
    """Wall seconds of ``inspect_ai.log.read_eval_log(LOG)`` in a child process: every sample read and
    validated by Inspect (it holds the log whole, which an import must not); with ``samples``, of
    iterating ``read_eval_log_samples(LOG)``, the reader the issue names, one sample at a time."""
    read = (
        "from inspect_ai.log import read_eval_log_samples as r; sum(1 for _ in r(sys.argv[1], all_samples_required=False))"
        if samples
        else "from inspect_ai.log import read_eval_log; read_eval_log(sys.argv[1])"
    )
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import sys; {read}", str(log)], check=True)
    return time.perf_counter() - started


def _last_run(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT run_id FROM runs ORDER BY started_seq DESC LIMIT 1").fetchone()[0]
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--small", type=int, default=1000, help="a smaller log first (0: none)")
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalstore-bench-inspect-") as tmp:
        workdir = args.dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        results = {n: measure(workdir, n) for n in (args.small, args.samples) if n}
    for n, figures in results.items():
        print(f"samples {n}: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))
    if args.small and args.samples:
        small, big = results[args.small], results[args.samples]
        for key in ("export_import_rss_mb", "export_replay_rss_mb"):
            print(
                f"{key}: {small[key]:.0f} MB at {args.small} samples, {big[key]:.0f} MB at {args.samples} ({big[key] / small[key]:.2f}x)"
            )


if __name__ == "__main__":
    main()
