"""A replay session: the run folder, the processes it started, and leaving the host as it was.

    with Session(run_id) as s:             # lock, checks, run folder in every hierarchy
        s.backend.create(["online", "offline"])
        s.spawn(["stress", "--cpu", "2"], cgroup="offline")
    # here every process is killed and every cgroup removed, whatever happened inside:
    # a normal end, an exception, Ctrl-C (SIGINT) or SIGTERM.

Processes are placed in their cgroups *before* they run anything: the child writes its own
pid to each hierarchy's cgroup.procs between fork and exec (a preexec function), so not one
instruction of the workload runs outside its cgroup.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from replay.cgroupfs import BlockDevice, Fs, HostBackend, HostError, Layout, block_device, detect_layout

LOCK_PATH = Path(
    os.environ.get("COLOSIM_LOCK", "/run/lock/colosim-replay.lock" if Path("/run/lock").is_dir() else "/tmp/colosim-replay.lock")
)


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or SIGINT) arrived: unwind, clean up, exit."""


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


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
    ) -> None:
        self.run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        self.layout = layout or detect_layout(io=io)
        self.backend = HostBackend(self.layout, self.run_id, fs=fs or Fs(), dry_run=dry_run)
        self.dry_run = dry_run
        self.check_root = check_root
        self.procs: list[subprocess.Popen] = []
        self._lock_fd: int | None = None
        self._old_handlers: dict[int, object] = {}
        self.say = log or (lambda msg: print(msg, file=sys.stderr))
        # IO: a scratch directory for dd's files (made on first use, removed on exit), on
        # the disk whose MAJ:MIN the blk-throttle rules name
        self.io = io
        self._scratch: Path | None = None
        self.io_counters = ""  # which kernel counters measure IO per cgroup (said when IO is used)

    # -- entering: lock, checks, run folder ---------------------------------------------

    def __enter__(self) -> Session:
        if not self.dry_run:
            self._lock()
        try:
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

    # -- IO scratch space ---------------------------------------------------------------

    def scratch_parent(self) -> Path:
        """Where the scratch directory goes: $TMPDIR (tempfile's choice)."""
        return Path(tempfile.gettempdir())

    def scratch_device(self) -> BlockDevice:
        return block_device(self._scratch or self.scratch_parent())

    def scratch(self) -> Path:
        """This session's scratch directory (a dry run names it without making it)."""
        if self._scratch is None:
            if self.dry_run:
                return self.scratch_parent() / f"colosim-io-{self.run_id}"
            self._scratch = Path(tempfile.mkdtemp(prefix=f"colosim-io-{self.run_id}-", dir=self.scratch_parent()))
        return self._scratch

    def _remove_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

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

        proc = subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            preexec_fn=join,
            start_new_session=True,
        )
        self.procs.append(proc)
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
        # Anything still in our cgroups (a daemon that left its group) goes too.
        for cg in self.backend.created():
            for pid in self.backend.procs(cg):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.procs.clear()

    # -- leaving ------------------------------------------------------------------------

    def __exit__(self, exc_type, exc, tb) -> None:
        # Signals stay masked to our handler until the folder is gone: a second Ctrl-C must
        # not interrupt the cleanup half-way.
        blocked = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            self.kill_all()
            self._remove_scratch()
            self.backend.remove()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
            self._old_handlers.clear()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
