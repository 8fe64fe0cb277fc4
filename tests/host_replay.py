"""Replay's host tests: whether this host can run them (one reason why not, or None), and
what they check a run left behind."""

from __future__ import annotations

import os
from pathlib import Path

from replay.cgroupfs import Layout, detect_layout, leftover_folders
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
