"""`colosim tune --cluster`: a Dask scheduler and two workers (one process, one thread each)
on loopback, started and stopped by the test as users start them (`dask scheduler`,
`dask worker ADDRESS`).

The truth is the local run: the core is deterministic per (scenario, seed), so the same
command with the same seeds must tell Optuna the same values, trial by trial, whether the
pieces (seed x case) ran in this process or spread over the workers — also when a worker is
SIGKILLed in the middle of a task (the scheduler runs the task again elsewhere). Skips with
the reason where Dask distributed is not installed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from test_tune import TINY
from test_tune_kill import states as stored_states

from sim.cli import main
from sim.tuning.cluster import join, pieces
from sim.tuning.study import Job, run_job

try:
    import distributed
except ImportError:  # the pieces' test below runs without it
    distributed = None
needs_dask = pytest.mark.skipif(distributed is None, reason="Dask distributed is not installed (pip install -e '.[cluster]')")

ROOT = Path(__file__).resolve().parent.parent
DASK = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]
S = optuna.trial.TrialState
# two cases (runs) and two seeds: four pieces a trial
CASES = """
[[runs]]
name = "four clients"

[[runs]]
name = "two clients"
set = { "workloads.web.clients" = 2 }
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """`dask scheduler` and two `dask worker`s as processes of their own (each in its own
    session, so stopping one stops its nanny and the worker process under it)."""

    def __init__(self, tmp: Path, allowed_failures: int = 3, workers: int = 2, nanny: bool = True) -> None:
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        port = self.address.rsplit(":", 1)[1]
        # the workers import the simulator from this checkout (a real cluster installs the wheel)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        # how many workers may die running a task before it fails (Dask's default is 3)
        env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(allowed_failures)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

        def start(name: str, cmd: list[str]) -> None:
            log = tmp / f"{name}.log"
            self.logs.append(log)
            with log.open("wb") as out:
                self.procs.append(subprocess.Popen(cmd, env=env, cwd=tmp, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))

        start("scheduler", [*DASK, "--host", "127.0.0.1", "--port", port, "--no-dashboard"])
        for i in range(workers):
            more = [] if nanny else ["--no-nanny"]
            start(
                f"worker{i}", [*WORKER, self.address, "--nworkers", "1", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard", *more]
            )
        self.client = distributed.Client(self.address, timeout=60, set_as_default=False)
        self.client.wait_for_workers(workers, timeout=60)

    def workers(self) -> dict[str, dict]:
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def log(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs)

    def stop(self) -> None:
        self.client.close(timeout=10)
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def _study(out: Path) -> optuna.Study:
    return optuna.load_study(study_name="tiny:koordinator", storage=f"sqlite:///{out / 'tune.db'}")


def _told(t: optuna.trial.FrozenTrial) -> tuple:
    """What a trial told Optuna: its values, its SLOs' violations (each seed's case against
    the same seed's solo run, so a piece joined to the wrong seed shows) and every metric of
    its summary."""
    constraints = {k: v for k, v in t.system_attrs.items() if k.startswith("constraints")}
    return (t.state, t.params, t.values, constraints, t.user_attrs.get("summary"))


@needs_dask
def test_a_cluster_study_tells_what_a_local_one_does(tmp_path, cluster):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY + CASES)
    common = ["tune", str(scenario), "--trials", "8", "--seeds", "2", "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--out", str(tmp_path / "cluster"), "--cluster", cluster.address]) == 0

    local, remote = _study(tmp_path / "local"), _study(tmp_path / "cluster")
    assert [_told(t) for t in remote.trials] == [_told(t) for t in local.trials]
    assert all(t.state is S.COMPLETE for t in remote.trials)
    assert remote.best_trial.params == local.best_trial.params and remote.best_value == local.best_value
    # the TPE sampler models from trial 4 on, so later trials' parameters depend on the values
    # told before: a differing value would have changed what it asked next
    assert len({tuple(t.params.items()) for t in remote.trials}) > 4
    # a trial's four pieces went to both workers, and not to this process
    workers = set(cluster.workers())
    ran_in = [t.user_attrs["ran_in"] for t in remote.trials]
    assert all(set(r) <= workers for r in ran_in), (ran_in, workers)
    assert any(set(r) == workers for r in ran_in), ran_in


# 80 s simulated: a piece takes about a second, long enough to be caught running — and the
# study long enough that it cannot end while a worker the scheduler counts as busy turns out to
# be between pieces a few times in a row (with 40 s the 6-trial study once finished first on a
# machine running `stress --cpu 1` beside the suite)
LONG = TINY.replace('duration = "3s"', 'duration = "80s"')
KILL_TRIALS = 6
KILL_TUNE = ["--trials", str(KILL_TRIALS), "--seeds", "2", "--sampler", "random", "--no-progress"]


@pytest.fixture(scope="module")
def local_long(tmp_path_factory: pytest.TempPathFactory) -> dict[int, optuna.trial.FrozenTrial]:
    """The kill tests' study run here (the random sampler asks the same parameters trial by
    trial, whatever order trials end in), by trial number."""
    tmp = tmp_path_factory.mktemp("local")
    (tmp / "tiny.toml").write_text(LONG)
    assert main(["tune", str(tmp / "tiny.toml"), *KILL_TUNE, "--out", str(tmp / "out")]) == 0
    return {t.number: t for t in _study(tmp / "out").trials}


def _mid_task(cluster: LocalCluster, db: Path, study: subprocess.Popen[bytes], log: Path) -> str:
    """Wait until the study is under way (a trial told) and a worker runs one of its pieces;
    that worker's address."""
    done, deadline = False, time.monotonic() + 60
    while time.monotonic() < deadline:
        assert study.poll() is None, log.read_text()
        done = done or (db.exists() and stored_states(db).get("COMPLETE", 0) > 0)
        busy = [w for w, keys in cluster.client.processing().items() if any(str(k).startswith("colosim-") for k in keys)]
        if done and busy:
            return busy[0]
        time.sleep(0.02)
    pytest.fail(f"no task was caught running\n{cluster.log()}")


def _kill_if_running(cluster: LocalCluster, address: str) -> bool:
    """SIGKILL the worker at `address` from inside, if it is executing a piece at that moment
    (then the scheduler has not heard the piece end: it was mid-task, for certain)."""

    def die_if_running(dask_worker) -> bool:  # a closure: sent by value, the workers cannot import this module
        if any(str(ts.key).startswith("colosim-") for ts in dask_worker.state.executing):
            os.kill(os.getpid(), signal.SIGKILL)
        return False

    try:
        cluster.client.run(die_if_running, workers=[address])
    except Exception:  # noqa: BLE001 - the worker died as it answered
        return True
    return False


@needs_dask
@pytest.mark.parametrize("allowed_failures", [3, 0], ids=["task-retried", "trial-failed"])
def test_a_worker_killed_mid_task_loses_no_trial(tmp_path, allowed_failures, local_long):
    """SIGKILL of the worker process running a piece (its nanny starts a new one). With Dask's
    default the scheduler runs the piece again elsewhere and every trial completes; with
    allowed-failures 0 the trial fails naming the dead worker. Either way the study holds its
    trials, none left RUNNING, and every completed one told what the local run told."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(LONG)
    out = tmp_path / "cluster"
    db = out / "tune.db"
    cluster = LocalCluster(tmp_path, allowed_failures)
    log = (tmp_path / "study.log").open("w")
    cmd = [sys.executable, "-m", "sim", "tune", str(scenario), *KILL_TUNE, "--jobs", "2", "--out", str(out), "--cluster", cluster.address]
    study = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        # a worker the scheduler counts as busy may hold a piece queued, or just finished one
        killed = _mid_task(cluster, db, study, tmp_path / "study.log")
        while not _kill_if_running(cluster, killed):
            killed = _mid_task(cluster, db, study, tmp_path / "study.log")
        assert study.wait(timeout=90) == 0, (tmp_path / "study.log").read_text()
        # the scheduler saw the worker go
        assert killed not in cluster.workers()
    finally:
        if study.poll() is None:
            study.kill()
            study.wait()
        log.close()
        cluster.stop()

    remote = _study(out)
    states = [t.state for t in remote.trials]
    assert len(states) == KILL_TRIALS and set(states) <= {S.COMPLETE, S.FAIL}, states
    failed = [t.user_attrs["error"] for t in remote.trials if t.state is S.FAIL]
    if allowed_failures:
        assert failed == []
    else:
        assert 1 <= len(failed) <= 2  # the killed worker held pieces of one or two trials
        assert all(e.startswith(f"worker {killed} died running it (1 worker in all;") for e in failed), failed

    # each completed trial told what the local run of the same command told
    for t in remote.trials:
        if t.state is S.COMPLETE:
            assert _told(t) == _told(local_long[t.number])


@needs_dask
def test_a_lost_scheduler_stops_the_study_with_one_line_and_nothing_running(tmp_path):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(LONG)
    out = tmp_path / "cluster"
    cluster = LocalCluster(tmp_path)
    cmd = [sys.executable, "-m", "sim", "tune", str(scenario), "--trials", "100", "--seeds", "2", "--jobs", "2", "--no-progress"]
    with (tmp_path / "study.log").open("w") as log:
        study = subprocess.Popen(
            [*cmd, "--out", str(out), "--cluster", cluster.address], cwd=ROOT, stdout=log, stderr=subprocess.PIPE, text=True
        )
    try:
        _mid_task(cluster, out / "tune.db", study, tmp_path / "study.log")
        os.killpg(cluster.procs[0].pid, signal.SIGKILL)  # the scheduler
        _, err = study.communicate(timeout=90)  # never a hang: the trials waiting on it fail
    finally:
        if study.poll() is None:
            study.kill()
            study.communicate()
        cluster.stop()
    assert study.returncode == 2 and err.strip().count("\n") == 0, err
    assert err.startswith(f"colosim: error: --cluster {cluster.address}: lost the scheduler"), err
    trials = _study(out).trials
    assert S.RUNNING not in {t.state for t in trials} and len(trials) < 100
    failed = [t.user_attrs["error"] for t in trials if t.state is S.FAIL]
    assert failed and all("scheduler" in e for e in failed), failed


@needs_dask
def test_a_cluster_left_without_workers_fails_the_waiting_trial_and_takes_no_more(tmp_path, monkeypatch):
    """The only worker (no nanny to restart it) killed while it runs the trial's piece: the
    piece waits for a worker that never comes; after NO_WORKER_S the trial fails with that
    reason and the runner refuses the next trial (the study stops) instead of hanging."""
    import tomllib

    from sim.errors import ScenarioError
    from sim.tuning import cluster as runners
    from sim.tuning.study import TrialError

    monkeypatch.setattr(runners, "NO_WORKER_S", 2)
    cluster = LocalCluster(tmp_path, workers=1, nanny=False)
    job = Job(tomllib.loads(LONG), {}, [1], ["tiny"], ["batch"], [])
    try:
        with runners.Cluster(cluster.address) as runner:
            trial = runner.submit(job)
            (address,) = cluster.workers()
            deadline = time.monotonic() + 30
            while not _kill_if_running(cluster, address):
                assert time.monotonic() < deadline and not trial.done(), "the piece was never caught running"
                time.sleep(0.02)
            with pytest.raises(TrialError, match=f"^cluster {cluster.address}: no worker in the cluster for 2 s$"):
                trial.result(timeout=30)
            with pytest.raises(ScenarioError, match=f"^--cluster {cluster.address}: no worker in the cluster for 2 s$"):
                runner.submit(job)
    finally:
        cluster.stop()


@needs_dask
def test_an_address_without_a_scheduler_is_one_line_before_any_trial(tmp_path, capsys, monkeypatch):
    from sim.tuning import cluster

    monkeypatch.setattr(cluster, "CONNECT_S", 2)  # Dask retries a refused connection until then
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        assert main(["tune", str(scenario), "--out", str(tmp_path / "out"), "--no-progress", "--cluster", address]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"colosim: error: --cluster {address}: no Dask scheduler answered there") and "\n" not in err, err
    assert not (tmp_path / "out" / "tune.db").exists()  # before the study was opened
    assert main(["tune", str(scenario), "--out", str(tmp_path / "out"), "--no-progress", "--cluster", "tcp://127.0.0.1"]) == 2
    assert "--cluster tcp://127.0.0.1: not a scheduler address like tcp://HOST:8786 (missing port number" in capsys.readouterr().err


def test_the_pieces_joined_are_the_whole_trial(tmp_path):
    """A trial of 2 seeds x 2 runs x 2 traces cut into its 8 pieces, each run on its own and
    joined, is what `measure` returns for the whole trial: the same numbers, seeds and cases
    in the same order (the local path is the truth)."""
    import tomllib

    from test_trace_driven import scenario, trace_file

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    a, b = trace_file(tmp_path / "a"), trace_file(tmp_path / "b", step=0.5)
    text = (
        scenario(a, duration="3s")
        + """
[[runs]]
name = "wide"

[[runs]]
name = "narrow"
set = { "node.cores_per_socket" = 8 }
"""
    )
    job = Job(tomllib.loads(text), {}, [1, 7], ["wide", "narrow"], ["batch"], [str(a), str(b)])
    parts = pieces(job)
    assert [(p.seeds, p.traces, p.cases) for p in parts[:3]] == [
        ([1], [str(a)], ["wide"]),
        ([1], [str(a)], ["narrow"]),
        ([1], [str(b)], ["wide"]),
    ]
    assert len(parts) == 8
    whole = run_job(job)[1]
    joined = join(job, [run_job(p)[1] for p in parts])
    assert [list(seed.items()) for seed in joined] == [list(seed.items()) for seed in whole]
    # the seeds and the cases differ, so a piece joined to the wrong place would show
    assert whole[0] != whole[1] and whole[0]["wide @ " + str(a)] != whole[0]["narrow @ " + str(a)]


@needs_dask
def test_a_broken_connection_while_a_trials_results_are_read_is_the_lost_scheduler():
    # the race the lost-scheduler test can meet: a piece's result() raises the comm error
    # before the watcher has seen the client close; the trial must still say why it failed
    from distributed.comm.core import CommClosedError

    from sim.tuning.cluster import _why
    from sim.tuning.study import TrialError

    for err in (
        CommClosedError("in <TCP (closed) ConnectionPool.gather>: Stream is closed"),
        ConnectionResetError(104, "Connection reset by peer"),
    ):
        why = _why(err)
        assert isinstance(why, TrialError) and str(why).startswith("lost the scheduler (") and "scheduler" in str(why)
    plain = ValueError("a scenario's own error")
    assert _why(plain) is plain  # other errors pass as they are
