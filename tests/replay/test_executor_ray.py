"""``replay --executor ray``: the same regrade as one process, on a local Ray cluster of two CPUs.

The driver is the only writer; a worker killed mid-regrade (its task retried by Ray) and a driver killed
mid-regrade (``--resume``) leave every test graded once, with the verdicts a local replay gives.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from scale_runs import build, scored_keys, verdicts

from evalstore.replay.executors.ray import RayExecutor
from evalstore.replay.regrade import ReplayOptions, replay_run
from evalstore.store import EventStore

ray = pytest.importorskip("ray")

EVALSTORE = Path(sys.executable).parent / "evalstore"
TIMEOUT = 240


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local cluster for the module (starting one takes seconds): this process is a driver of it, and
    the CLI's drivers join it by its address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _type_counts(store: EventStore, run_id: str) -> Counter[str]:
    return Counter(e.type for e in store.read_stream(run_id))


def test_a_400_test_ray_regrade_on_postgres_equals_one_process_though_a_worker_dies(
    postgres_url: str, tmp_path: Path, ray_cluster: str
) -> None:
    store = EventStore.open(postgres_url)
    run = build(tmp_path, store, 400)
    v2 = ReplayOptions(eval_path=str(run.v2), no_cache=True)  # no_cache: every code grader runs, in both
    (run.graders / "armed").touch()  # the first code grader to run kills its worker

    progress: list[object] = []
    on_ray = replay_run(
        store, run.run_id, v2, executor=RayExecutor(ray_cluster), concurrency=4, progress=progress.append
    )

    assert (run.graders / "fired").exists(), "no worker was killed"
    assert len(progress) == 400  # progress counts the tests done across the cluster, each once
    here = replay_run(store, run.run_id, v2, concurrency=4)
    assert on_ray.complete and here.complete
    mine, theirs = verdicts(store, on_ray.run_id), verdicts(store, here.run_id)
    assert len(mine) == 400 * 3
    assert mine == theirs
    scores = Counter(v[0] for (_, grader), v in mine.items() if grader == "total-check")
    assert scores[1.0] > 50 and scores[0.5] > 50  # v2's script ran: its verdicts vary with the answer
    assert all(v[3][0][0].startswith("v2 ") for (_, grader), v in mine.items() if grader == "total-check")
    # Nothing lost, nothing doubled: one score per test, and the same events as the local replay's.
    assert scored_keys(store, on_ray.run_id) == scored_keys(store, here.run_id)
    assert len(set(scored_keys(store, on_ray.run_id))) == 400
    assert _type_counts(store, on_ray.run_id) == _type_counts(store, here.run_id)
    assert store.verify().ok
    store.close()


def test_a_killed_ray_driver_is_finished_by_resume_on_sqlite(tmp_path: Path, ray_cluster: str) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, 40)
    (run.graders / "slow").touch()  # each code grader takes 0.5 s: the driver is killed half way
    ray_args = ["--executor", "ray", "--ray-address", ray_cluster]
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v2), "--no-cache", *ray_args]
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        replay_id, done = None, 0
        while time.monotonic() < deadline and done == 0:
            time.sleep(0.05)
            replays = [r for r in store.query("runs") if r["kind"] == "replay"]
            if replays:
                replay_id = replays[0]["run_id"]
                done = len(store.query("results", run_id=replay_id))
        assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
    finally:
        driver.kill()
        driver.wait(timeout=30)
    assert replay_id is not None and 0 < done < 40, done
    done = len(store.query("results", run_id=replay_id))  # what it had appended when it died

    resumed = subprocess.run(
        [str(EVALSTORE), "--db", url, "replay", "--resume", replay_id, *ray_args, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ},
    )
    assert resumed.returncode in (0, 1), resumed.stderr  # 1: tests below the threshold
    assert [r["status"] for r in store.query("runs", run_id=replay_id)] == ["completed"]
    assert len(set(scored_keys(store, replay_id))) == len(scored_keys(store, replay_id)) == 40
    (run.graders / "slow").unlink()
    here = replay_run(store, run.run_id, ReplayOptions(eval_path=str(run.v2), no_cache=True))
    assert verdicts(store, replay_id) == verdicts(store, here.run_id)
    assert _type_counts(store, replay_id) == _type_counts(store, here.run_id)
    assert store.verify().ok
    store.close()


def test_a_batched_replay_on_ray_hands_the_batch_replies_to_the_workers(
    tmp_path: Path, ray_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judge_server import JudgeServer, freeform
    from scale_runs import JUDGE_KEY_ENV

    monkeypatch.setenv(JUDGE_KEY_ENV, "sk-ray-batch-0123456789")
    monkeypatch.setenv("EVALSTORE_JUDGE_BATCH_POLL", "0.05")
    with JudgeServer(lambda r: freeform(1.0 if "= 1" in r.user else 0.3)) as server:
        store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
        run = build(tmp_path / "suite", store, 12, judge_url=server.base_url)
        options = ReplayOptions(
            eval_path=str(run.v1),
            targets_path=str(run.root / "targets.yaml"),
            judge_target="judge",
            graders=["quality"],
            batch=True,
        )
        on_ray = replay_run(store, run.run_id, options, executor=RayExecutor(ray_cluster))
        assert server.requests == [] and len(server.batches) == 1  # the workers asked no judge themselves
        assert on_ray.batch is not None and on_ray.batch.answered == 12
        scores = {k[0]: v[0] for k, v in verdicts(store, on_ray.run_id).items() if k[1] == "quality"}
        assert len(scores) == 12 and set(scores.values()) == {1.0, 0.3}
        assert store.verify().ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _replays(store: EventStore) -> list[str]:
    return [r["run_id"] for r in store.query("runs") if r["kind"] == "replay"]


def test_a_ray_address_nobody_answers_at_fails_in_seconds_naming_it_and_writes_no_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, 3)
    address = f"127.0.0.1:{_free_port()}"  # nothing listens there (Ray alone would retry for ~14 minutes)
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v2)]
    start = time.monotonic()
    done = subprocess.run(
        [*argv, "--executor", "ray", "--ray-address", address], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert time.monotonic() - start < 30
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and f"no Ray cluster at {address} (--ray-address)" in done.stderr
    assert _replays(store) == []  # nothing for `last` to name
    store.close()


def test_executor_ray_without_ray_installed_writes_no_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, 3)
    # Ray absent, as in an environment without it: `import ray` raises ImportError.
    absent = (
        "import sys; sys.modules['ray'] = None; from evalstore.cli import entry; sys.argv[0] = 'evalstore'; entry()"
    )
    argv = ["--db", url, "replay", run.run_id, "--eval", str(run.v2), "--executor", "ray"]
    done = subprocess.run(
        [sys.executable, "-c", absent, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "--executor ray needs Ray" in done.stderr
    assert _replays(store) == []
    store.close()


def test_the_store_url_sent_to_ray_workers_carries_no_password() -> None:
    from sqlalchemy.engine import make_url

    from evalstore.replay.executors.ray import sent_url

    sent = sent_url(make_url("postgresql+psycopg://evals:s3cret-pw@db.internal:5432/evals?sslmode=require"))
    assert "s3cret" not in sent
    assert make_url(sent).password is None
    assert sent == "postgresql+psycopg://evals@db.internal:5432/evals?sslmode=require"


def test_a_local_ray_cluster_replay_prints_none_of_rays_own_warnings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, 3)
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v2), "--executor", "ray"]
    done = subprocess.run([*argv, "--concurrency", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode in (0, 1), done.stderr  # 1: tests below the threshold
    assert "Token authentication" not in done.stderr and "RAY_" not in done.stderr, done.stderr
    store.close()


def test_a_ray_address_that_answers_but_is_no_ray_head_fails_in_one_try(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, 3)
    with socket.create_server(("0.0.0.0", 0)) as listener:  # accepts connections, speaks no Ray
        listener.listen(64)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v2)]
        start = time.monotonic()
        done = subprocess.run(  # Ray alone: 20 tries of about 40 s each
            [*argv, "--executor", "ray", "--ray-address", address],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=150,
        )
    assert time.monotonic() - start < 100
    assert done.returncode == 2, done.stderr
    assert f"cannot join the Ray cluster at {address}" in done.stderr
    assert _replays(store) == []
    store.close()


def test_sigterm_stops_a_ray_replay_as_ctrl_c_does(tmp_path: Path, ray_cluster: str) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, 40)
    (run.graders / "slow").touch()  # each code grader takes 0.5 s: the driver is stopped half way
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v2), "--no-cache"]
    driver = subprocess.Popen(
        [*argv, "--executor", "ray", "--ray-address", ray_cluster],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not any(store.query("results", run_id=r) for r in _replays(store)):
            time.sleep(0.05)
        (run.graders / "hang").touch()  # the graders started from now on run two minutes
        while time.monotonic() < deadline and not (run.graders / "hung").exists():
            time.sleep(0.05)
        driver.terminate()  # SIGTERM, after ray.init (which installs a handler of its own: exit 15)
        _, err = driver.communicate(timeout=60)
    finally:
        driver.kill()
    assert driver.returncode == 130, err
    assert "replay --resume" in err
    # The graders running on the cluster end with the driver's job, within the time a worker takes to go.
    hung = [int(pid) for pid in (run.graders / "hung").read_text().split()]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(pid) for pid in hung):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in hung), hung
    store.close()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that will never reap it (Linux's ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
