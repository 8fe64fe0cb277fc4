"""One Optuna study shared through PostgreSQL: a throwaway server on loopback (a new one for
each test), two `colosim tune` workers on the same --storage and --study, then the study is
checked (the trial count over both workers, both workers' trials, one defaults trial, nothing
left RUNNING) and a third run of the same command adds nothing.

test_two_workers_started_together starts both at the same instant on the empty database: the
race to create Optuna's tables and to enqueue the defaults trial must both come out right.

Needs root (initdb and pg_ctl run as the `postgres` user), a PostgreSQL server package
(/usr/lib/postgresql/<version>/bin) and psycopg; elsewhere the test skips with the reason."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tune import TINY as SCENARIO  # a 4-CPU node where each trial takes ~60 ms

COLOSIM = [sys.executable, "-m", "sim"]
TRIALS = 60  # ~60 ms a trial, ~1.5 s to start a worker: the first is still asking when the second joins
STUDY = "pg-shared"


def _version(initdb: str) -> tuple[int, ...]:
    v = Path(initdb).parent.parent.name
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def _reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (initdb and pg_ctl run as the postgres user)"
    if _bin_dir() is None:
        return "no PostgreSQL server: /usr/lib/postgresql/*/bin/initdb not found"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not importable (pip install psycopg-binary)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres system user"
    if shutil.which("runuser") is None:
        return "runuser not found"
    return None


REASON = _reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"PostgreSQL study unavailable: {REASON}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(*cmd: str | Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, cmd)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
    )


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1:<free port> with a database `colosim`; stopped and
    its data removed afterwards, whatever happened."""
    bin_dir = _bin_dir()
    assert bin_dir is not None
    pw = pwd.getpwnam("postgres")
    top = Path(tempfile.mkdtemp(prefix="colosim-pg-"))
    data, log = top / "data", top / "server.log"
    started = False
    try:
        os.chown(top, pw.pw_uid, pw.pw_gid)
        r = _as_postgres(bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
        assert r.returncode == 0, f"initdb failed:\n{r.stdout}\n{r.stderr}"
        port = _free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {top} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        started = True  # from here on, try to stop it even if start reports failure
        r = _as_postgres(bin_dir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "-t", "30", "start")
        if r.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            pytest.fail(f"pg_ctl start failed:\n{r.stdout}\n{r.stderr}\n{server_log}")
        r = _as_postgres(bin_dir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "colosim")
        assert r.returncode == 0, f"createdb failed:\n{r.stdout}\n{r.stderr}"
        # the driver named: SQLAlchemy 2.1 maps a bare postgresql:// to psycopg (3), while
        # the project's extras install psycopg
        yield f"postgresql://postgres@127.0.0.1:{port}/colosim"
    finally:
        if started:
            _as_postgres(bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "-t", "30", "stop")
        shutil.rmtree(top, ignore_errors=True)


def _tune(scenario: Path, url: str, study: str, out: Path, log: Path) -> tuple[subprocess.Popen, Path]:
    cmd = [*COLOSIM, "tune", str(scenario), "--trials", str(TRIALS), "--storage", url, "--study", study, "--no-progress", "--out", str(out)]
    with open(log, "w") as f:  # the child holds its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=scenario.parent), log


def _finish(procs: list[tuple[subprocess.Popen, Path]], timeout: float = 120) -> None:
    try:
        for p, _ in procs:
            p.wait(timeout=timeout)
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _study_started(url: str, worker: subprocess.Popen, timeout: float = 60) -> None:
    """Wait until the first worker has created Optuna's tables, the study and its defaults
    trial (read with psycopg: opening an RDBStorage here would create the tables itself)."""
    import psycopg

    dsn = url.replace("+psycopg", "")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert worker.poll() is None, f"the first worker exited {worker.returncode} before its first trial"
        with psycopg.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("SELECT to_regclass('public.trials') IS NOT NULL")
            if cur.fetchone()[0]:
                cur.execute("SELECT count(*) FROM trials")
                if cur.fetchone()[0] > 0:
                    return
        time.sleep(0.05)
    pytest.fail(f"no trial in the study {timeout} s after the first worker started")


def _check_study(url: str, study_name: str, workers: list[tuple[subprocess.Popen, Path]]) -> list:
    """The study two workers made together: the trial count over both, both workers' trials,
    one defaults trial, nothing left RUNNING, a trial meeting the SLO."""
    import optuna

    for p, log in workers:
        assert p.returncode == 0, f"worker {p.pid} exited {p.returncode}:\n{log.read_text()}"
    study = optuna.load_study(study_name=study_name, storage=url)
    trials = study.get_trials(deepcopy=False)
    S = optuna.trial.TrialState
    states = {t.number: t.state.name for t in trials}
    assert TRIALS <= len(trials) <= TRIALS + 1, f"{len(trials)} trials for --trials {TRIALS}"
    assert all(s in ("COMPLETE", "FAIL") for s in states.values()), f"unfinished trials: {states}"
    host = socket.gethostname()
    seen = Counter(str(t.user_attrs.get("worker")) for t in trials)
    assert set(seen) == {f"{host}:{p.pid}" for p, _ in workers}, f"trials per worker: {dict(seen)}"
    defaults = [t.number for t in trials if t.user_attrs.get("defaults")]
    assert len(defaults) == 1, f"trials with the defaults attribute: {defaults}"
    feasible = [t for t in trials if t.state is S.COMPLETE and t.constraints and all(v <= 0 for v in t.constraints.values())]
    assert feasible, "no COMPLETE trial meets the SLO"
    assert "spec" in study.user_attrs
    return trials


def test_two_workers_share_one_study(tmp_path: Path, postgres_url: str) -> None:
    """The second worker joins once the first has set the study up (as a second machine
    would); both ask and tell until the study holds --trials, then a third run adds nothing."""
    import optuna

    scenario = tmp_path / "pg.toml"
    scenario.write_text(SCENARIO)
    first = _tune(scenario, postgres_url, STUDY, tmp_path / "out1", tmp_path / "worker1.log")
    workers = [first]
    try:
        _study_started(postgres_url, first[0])
        workers.append(_tune(scenario, postgres_url, STUDY, tmp_path / "out2", tmp_path / "worker2.log"))
    finally:
        _finish(workers)
    trials = _check_study(postgres_url, STUDY, workers)
    for i in (1, 2):
        assert (tmp_path / f"out{i}" / "tuned_policy.toml").is_file()

    # the study is full: the same command again runs no trial and prints the summary
    third = subprocess.run(
        [
            *COLOSIM,
            "tune",
            str(scenario),
            "--trials",
            str(TRIALS),
            "--storage",
            postgres_url,
            "--study",
            STUDY,
            "--no-progress",
            "--out",
            str(tmp_path / "out3"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert third.returncode == 0, third.stdout + third.stderr
    assert any(line.startswith("study ") for line in third.stdout.splitlines()), third.stdout
    after = optuna.load_study(study_name=STUDY, storage=postgres_url).get_trials(deepcopy=False)
    assert len(after) == len(trials), f"the third run added {len(after) - len(trials)} trial(s)"


def test_two_workers_started_together(tmp_path: Path, postgres_url: str) -> None:
    """Both workers started at the same instant on a fresh database, as `colosim tune --help`
    invites (run the same command on every machine)."""
    scenario = tmp_path / "pg.toml"
    scenario.write_text(SCENARIO)
    workers = [_tune(scenario, postgres_url, STUDY, tmp_path / f"out{i}", tmp_path / f"worker{i}.log") for i in (1, 2)]
    _finish(workers)
    _check_study(postgres_url, STUDY, workers)
