"""Replay's host tests: whether this host can run them (one reason why not, or None), and
what they check a run left behind."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from replay.cgroupfs import Layout, detect_layout, leftover_folders, remove_tree
from sim.errors import HostError


def unavailable(io: bool = False) -> str | None:
    """Root, a cgroup layout (with the block IO controller when `io`), our own cgroup
    writable in every hierarchy."""
    if os.geteuid() != 0:
        return "replay needs root"
    try:
        layout = detect_layout(io=io)
    except HostError as err:
        return str(err)
    for key in layout.keys:
        if not os.access(layout.own_dir(key), os.W_OK):
            return f"{layout.own_dir(key)} is not writable"
    return None


KNOB_FILES = (
    "cpu.shares",
    "cpu.idle",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpu.cfs_burst_us",
    "cpu.weight",
    "cpu.max",
    "cpuset.cpus",
    "cpuset.mems",
    "cgroup.subtree_control",
    "memory.limit_in_bytes",
)


def parent_state(layout: Layout) -> dict[str, str]:
    """Every knob file of our own cgroup, and the names of its children."""
    state = {}
    for key in layout.keys:
        own = layout.own_dir(key)
        for name in KNOB_FILES:
            f = own / name
            if f.exists():
                state[f"{key}/{name}"] = f.read_text()
        state[f"{key}/children"] = " ".join(sorted(p.name for p in own.iterdir() if p.is_dir()))
    return state


def is_load(argv: list[bytes]) -> bool:
    """Whether a command line runs colosim-load, in any form replay.workloads.load_command
    starts it: the binary, the console script (through its #! line: python SCRIPT ...), or
    python -m replay.load."""
    return any(b"colosim-load" in a for a in argv[:2]) or argv[1:3] == [b"-m", b"replay.load"]


def load_processes() -> list[int]:
    """Processes still running colosim-load."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if is_load((d / "cmdline").read_bytes().split(b"\0")):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def assert_clean(layout: Layout, before: dict[str, str]) -> None:
    assert leftover_folders(layout) == []
    assert load_processes() == []
    assert parent_state(layout) == before


# A cgroup of the test session's own, in every v1 hierarchy replay uses. The cpu hierarchies
# of this kind of host are shared with other containers (their /proc/self/cgroup says "/"
# too, from another pid namespace): a replay running there — another clone's test suite —
# puts its run folder beside ours, where every "nothing left behind" check would see it and
# `colosim replay --cleanup` would remove it. Inside a cgroup of its own the session sees
# only its own replays' folders.
SESSION_PREFIX = "tests-colosim-"


def enter_session_cgroup() -> dict[Path, Path] | None:
    """Move this process into a new child of its own cgroup in each v1 hierarchy (cpuset
    copies its parent's cpus and mems, as a cgroup must have them before it takes a task);
    returns {child: parent} to leave by, or None where this host cannot (not root, v2)."""
    if unavailable() is not None:
        return None
    layout = detect_layout(io=None, memory=None)
    if layout.version != 1:
        return None  # v2: no process may sit in an inner cgroup; the session stays where it is
    name = f"{SESSION_PREFIX}{os.getpid()}-{os.urandom(3).hex()}"
    made: dict[Path, Path] = {}
    try:
        for key in layout.keys:
            parent = layout.own_dir(key)
            child = parent / name
            child.mkdir()
            made[child] = parent
            if key == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (child / f).write_text((parent / f).read_text())
            if key == "cpu" and (parent / "cpu.rt_runtime_us").exists():
                # a new v1 cpu cgroup has no real-time runtime, and a task in it may not take
                # SCHED_FIFO at all (EPERM); a test asks for it (test_replay_slice_host): 1%
                # of the period, from the host's RT budget every group shares
                try:
                    (child / "cpu.rt_runtime_us").write_text(str(RT_RUNTIME_US))
                except OSError:
                    pass  # the host's RT budget is taken: that test then says so
        for child in made:
            (child / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        leave_session_cgroup(made)
        raise
    _SESSION.update(made)
    return made


RT_RUNTIME_US = 10_000
_SESSION: dict[Path, Path] = {}


@contextmanager
def outside_session_cgroup():
    """This process back where the session started, while a test that needs that place (the
    root cpu cgroup, where autogroups apply) runs; nothing to do where it never moved."""
    for parent in _SESSION.values():
        (parent / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        for child in _SESSION:
            (child / "cgroup.procs").write_text(str(os.getpid()))


def leave_session_cgroup(made: dict[Path, Path]) -> list[str]:
    """Back to where the session started, then remove its cgroups (replay.cgroupfs
    remove_tree: a process a test leaked is killed); what stays is said, never raised."""
    import signal

    said: list[str] = []
    _SESSION.clear()
    for child, parent in made.items():
        if (child / "cgroup.procs").exists():
            (parent / "cgroup.procs").write_text(str(os.getpid()))

    def kill(pid: int) -> None:
        said.append(f"killed {pid}, left by a test")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for child in made:
        try:
            remove_tree(child, kill=kill)
        except OSError as err:
            said.append(f"{child}: not removed ({err})")
    return said


def children(pid: int) -> list[int]:
    """A process's children (its main thread's: /proc/PID/task/PID/children), zombies included."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
