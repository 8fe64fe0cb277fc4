"""A replay session: the run folder, the processes it started, and leaving the host as it was.

    with Session(run_id) as s:             # lock, checks, run folder in every hierarchy
        s.backend.create(["online", "offline"])
        s.spawn(["stress", "--cpu", "2"], cgroup="offline")
    # here every process is killed and every cgroup removed, whatever happened inside:
    # a normal end, an exception, Ctrl-C (SIGINT) or SIGTERM.

Processes are placed in their cgroups *before* they run anything: the child writes its own
pid to each hierarchy's cgroup.procs between fork and exec (a preexec function), so not one
instruction of the workload runs outside its cgroup.

Everything a run writes to the file system (dd's scratch files, each server's data and
config, load generators' reports) lies in one directory, $TMPDIR/colosim-replay-RUN_ID, whose
`owner.json` names the replay process (pid and start time); the run is also recorded in
RUNS_DIR/RUN_ID.json (beside the lock) with that directory, wherever TMPDIR pointed. A
killed replay (SIGKILL: no cleanup ran) leaves both; `colosim replay --cleanup` finds them
(`leftover_runs`) and removes what a dead replay left — the cgroups, the processes in them
or holding the directory, and the directory — and leaves a live replay's alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replay.cgroupfs import BlockDevice, Fs, HostBackend, HostError, Layout, block_device, detect_layout
from sim import liveness

LOCK_PATH = Path(
    os.environ.get("COLOSIM_LOCK", "/run/lock/colosim-replay.lock" if Path("/run/lock").is_dir() else "/tmp/colosim-replay.lock")
)
# one file per replay under way (or killed): its owner and its directory
RUNS_DIR = LOCK_PATH.with_name(LOCK_PATH.name + ".runs")
SCRATCH_PREFIX = "colosim-replay-"


class _Recorded(subprocess.Popen):
    """A Popen that tells `on_fork` its child's pid as soon as the fork made it, even when a
    signal (Ctrl-C: Interrupted) breaks the constructor afterwards, while it waits for the
    exec: the caller never gets that Popen, but kill_all still finds the child, which joins its
    cgroup when it runs and would keep the cgroup busy."""

    def __init__(self, *args, on_fork, **kwargs) -> None:
        self._on_fork = on_fork
        super().__init__(*args, **kwargs)

    def _execute_child(self, *args, **kwargs) -> None:
        try:
            super()._execute_child(*args, **kwargs)  # type: ignore[misc]  # private in the stubs
        finally:
            if getattr(self, "pid", None):
                self._on_fork(self.pid)


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or SIGINT) arrived: unwind, clean up, exit."""


# Signals whose Interrupted was raised: Python drops an exception raised where it ignores
# them (an at-fork hook that Popen's preexec_fn path runs, a __del__), so the run also stops at
# the next safe point (`raise_if_interrupted`) rather than running on to the end.
_pending: list[str] = []


def _raise_interrupted(signum, frame):
    name = signal.Signals(signum).name
    _pending.append(name)
    raise Interrupted(name)


def raise_if_interrupted() -> None:
    """Raise the Interrupted of a signal that arrived in this session, even if where it was
    first raised swallowed it."""
    if _pending:
        raise Interrupted(_pending[-1])


class Session:
    def __init__(
        self,
        run_id: str | None = None,
        layout: Layout | None = None,
        fs: Fs | None = None,
        dry_run: bool = False,
        check_root: bool = True,
        log=None,
        io: bool = False,
        memory: bool = False,
    ) -> None:
        self.run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        self.layout = layout or detect_layout(io=io, memory=memory)
        self.backend = HostBackend(self.layout, self.run_id, fs=fs or Fs(), dry_run=dry_run)
        self.dry_run = dry_run
        self.check_root = check_root
        self.procs: list[subprocess.Popen] = []
        self._forked: list[int] = []  # every child forked, recorded the moment it exists
        self._lock_fd: int | None = None
        self._old_handlers: dict[int, object] = {}
        self.say = log or (lambda msg: print(msg, file=sys.stderr))
        # the run's directory (made on first use, removed on exit); IO: dd's files are in its
        # io/, on the disk whose MAJ:MIN the blk-throttle rules name
        self.io = io
        self.dir = Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}{self.run_id}"
        self._made_dir = False
        self._record: Path | None = None
        self.io_counters = ""  # which kernel counters measure IO per cgroup (said when IO is used)

    # -- entering: lock, checks, run folder ---------------------------------------------

    def __enter__(self) -> Session:
        if not self.dry_run:
            self._lock()
        try:
            if not self.dry_run:
                self._write_record()
            if self.check_root:
                self.backend.check_writable()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                self._old_handlers[sig] = signal.signal(sig, _raise_interrupted)
            self.backend.create([])
            if self.io:
                self.backend.device = self.scratch_device()
                self.io_counters = self.backend.activate_io_accounting()
                self.say(f"IO per cgroup from {self.io_counters}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _lock(self) -> None:
        fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise HostError(
                f"another replay is running ({holder}; lock {LOCK_PATH}): two replays on one host would measure each other"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, run colosim-{self.run_id}\n".encode(), 0)
        self._lock_fd = fd

    def _write_record(self) -> None:
        """RUNS_DIR/RUN_ID.json: who runs, and where its directory and cgroups are, written
        before either exists."""
        RUNS_DIR.mkdir(mode=0o755, exist_ok=True)
        record = RUNS_DIR / f"{self.run_id}.json"
        doc = {"run_id": self.run_id, "owner": liveness.me(), "dir": str(self.dir), "folder": self.backend.folder}
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc) + "\n")
        tmp.rename(record)
        self._record = record

    # -- the run's directory ------------------------------------------------------------

    def run_dir(self) -> Path:
        """The run's directory in $TMPDIR, made on first use with its owner.json."""
        if not self._made_dir:
            self.dir.mkdir(mode=0o700)
            self._made_dir = True
            (self.dir / "owner.json").write_text(json.dumps({"run_id": self.run_id, "owner": liveness.me()}) + "\n")
        return self.dir

    def scratch_parent(self) -> Path:
        """Where the run's directory goes: $TMPDIR (tempfile's choice)."""
        return self.dir.parent

    def scratch_device(self) -> BlockDevice:
        return block_device(self.scratch_parent())

    def scratch(self) -> Path:
        """The IO scratch directory, io/ in the run's directory (a dry run names it without
        making it)."""
        if self.dry_run:
            return self.dir / "io"
        d = self.run_dir() / "io"
        d.mkdir(exist_ok=True)
        return d

    def _remove_dir(self) -> None:
        if self._made_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._made_dir = False

    # -- processes ----------------------------------------------------------------------

    def spawn(
        self,
        argv: Sequence[str],
        cgroup: str,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen:
        """Start `argv` inside `cgroup` (joined before exec) in a process group of its own."""
        if self.dry_run:
            self.say(f"would run in {cgroup}: {' '.join(argv)}")
            return None  # type: ignore[return-value]
        targets = [str(p) for p in self.backend.join_paths(cgroup)]

        def join() -> None:
            # Between fork and exec: only async-signal-safe work (open/write/close).
            pid = str(os.getpid()).encode()
            for t in targets:
                fd = os.open(t, os.O_WRONLY)
                os.write(fd, pid)
                os.close(fd)

        proc = _Recorded(
            list(argv),
            on_fork=self._forked.append,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            preexec_fn=join,
            start_new_session=True,
        )
        self.procs.append(proc)
        raise_if_interrupted()  # a signal during the fork's hooks is lost there
        return proc

    def kill_all(self) -> None:
        """SIGKILL every process group we started, and reap them."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        # children whose Popen a signal interrupted after the fork: never in self.procs
        tracked = {p.pid for p in self.procs}
        for pid in self._forked:
            if pid in tracked:
                continue
            try:
                os.killpg(pid, signal.SIGKILL)  # its own process group once setsid ran
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._forked.clear()
        # Anything still in our cgroups (a daemon that left its group) goes too, sweep after
        # sweep until they are empty: a signal that interrupts Popen after its fork leaves a
        # child we never recorded, which joins its cgroup (between fork and exec) when it
        # runs, perhaps after the first sweep, and may fork workers of its own (stress).
        for _ in range(50):
            left = [pid for cg in self.backend.created() for pid in self.backend.procs(cg)]
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        self.procs.clear()

    # -- leaving ------------------------------------------------------------------------

    def __exit__(self, exc_type, exc, tb) -> None:
        # Signals stay masked to our handler until the folder is gone: a second Ctrl-C must
        # not interrupt the cleanup half-way.
        blocked = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            self.kill_all()
            self._remove_dir()
            self.backend.remove()
            for left in self.backend.leftovers:  # said once, never raised: the rest is cleaned up
                self.say(f"warning: {left}")
            self.backend.leftovers.clear()
            if self._record is not None:
                self._record.unlink(missing_ok=True)
                self._record = None
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
            self._old_handlers.clear()
            _pending.clear()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)


# --- what killed replays left ---------------------------------------------------------------


@dataclass
class Leftover:
    """A replay's run as found by `--cleanup`: its record (if any), its directory, owner."""

    run_id: str
    owner: dict
    dir: Path | None
    folder: str
    record: Path | None = None

    @property
    def alive(self) -> bool:
        return not liveness.gone(self.owner) if self.owner else False


def leftover_runs(tmp: Path | None = None) -> list[Leftover]:
    """Runs recorded in RUNS_DIR, and run directories in $TMPDIR (`tmp`) without a record."""
    tmp = Path(tempfile.gettempdir()) if tmp is None else tmp
    out: dict[str, Leftover] = {}
    for f in sorted(RUNS_DIR.glob("*.json")) if RUNS_DIR.is_dir() else []:
        try:
            doc = json.loads(f.read_text())
            run_id = str(doc["run_id"])
            d = Path(doc["dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        # only ever a directory of ours, whatever the record says
        out[run_id] = Leftover(
            run_id, doc.get("owner") or {}, d if d.name == SCRATCH_PREFIX + run_id else None, str(doc.get("folder", "")), f
        )
    for d in sorted(tmp.glob(SCRATCH_PREFIX + "*")):
        run_id = d.name[len(SCRATCH_PREFIX) :]
        if run_id in out or not d.is_dir() or d.is_symlink():
            continue
        try:
            owner = json.loads((d / "owner.json").read_text()).get("owner") or {}
        except (OSError, ValueError, AttributeError):
            owner = {}  # killed before owner.json was written: nobody owns it
        out[run_id] = Leftover(run_id, owner, d, "colosim-" + run_id)
    return list(out.values())


def running_folder() -> str | None:
    """The run folder of the replay holding the lock now, if one does (its lock says)."""
    try:
        fd = os.open(LOCK_PATH, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it
    except BlockingIOError:
        text = os.pread(fd, 200, 0).decode(errors="replace")
        _, _, run = text.partition(", run ")
        return run.strip() or None
    finally:
        os.close(fd)


def holders(directory: Path) -> list[int]:
    """Processes with their working directory or an open file inside `directory`."""
    inside = str(directory.resolve()) + "/"
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            links = [os.readlink(p / "cwd")] + [os.readlink(fd) for fd in (p / "fd").iterdir()]
        except OSError:
            continue
        if any((link + "/").startswith(inside) for link in links):
            out.append(int(p.name))
    return out


def remove_leftover(run: Leftover) -> tuple[bool, int, int, list[int]]:
    """Kill what holds the run's directory, remove it and the record: whether the directory
    was there, its files and bytes, the pids killed."""
    files = size = 0
    killed: list[int] = []
    d = run.dir
    there = d is not None and d.is_dir() and not d.is_symlink()
    if d is not None and there:
        for pid in holders(d):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        for f in d.rglob("*"):
            try:
                if f.is_file() and not f.is_symlink():
                    files += 1
                    size += f.stat().st_size
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)
    if run.record is not None:
        run.record.unlink(missing_ok=True)
    return there, files, size, killed
