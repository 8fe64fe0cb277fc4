"""Who owns something a process left behind, and whether that process still lives.

An owner is recorded as this machine's identity (host name, boot id, PID namespace) with the
process's pid and its start time (field 22 of /proc/PID/stat, in clock ticks since boot): a
pid the kernel gave to another process since is not mistaken for the owner, nor is a process
of another machine or container that happens to have the same pid.

`watch_owner` makes the calling process die with a given one (the tuner's trial processes
with the study process), also when that is not its parent.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None if there is no such process
    or it is a zombie (dead, not yet reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": state is field 3
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def machine() -> dict[str, str]:
    """This machine and PID namespace: pids are only comparable within one."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {"host": socket.gethostname(), "boot": boot, "pidns": pidns}


def me(pid: int | None = None) -> dict[str, Any]:
    """The owner record of process `pid` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return {**machine(), "pid": pid, "start": start_time(pid)}


def same_machine(owner: dict[str, Any]) -> bool:
    return all(owner.get(k) == v for k, v in machine().items())


def rebooted(owner: dict[str, Any]) -> bool:
    """The owner ran on this host (by name and namespace) before its last boot."""
    here = machine()
    return owner.get("host") == here["host"] and bool(owner.get("boot")) and owner.get("boot") != here["boot"]


def alive(owner: dict[str, Any]) -> bool:
    """Whether the owner (of this machine) still runs: its pid exists with the same start time."""
    pid, start = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int):
        return False
    now = start_time(pid)
    return now is not None and (start is None or now == start)


def gone(owner: dict[str, Any]) -> bool:
    """Known for sure to be dead: of this machine and not alive, or of this host before a
    reboot. An owner on another machine is never `gone` (ask a heartbeat)."""
    return rebooted(owner) or (same_machine(owner) and not alive(owner))


def describe(owner: dict[str, Any]) -> str:
    return f"pid {owner.get('pid')} on {owner.get('host')}"


# --- dying with the owner -----------------------------------------------------------------


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """prctl(PR_SET_PDEATHSIG): the kernel sends `sig` when the thread that forked us ends."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def watch_owner(owner: dict[str, Any], poll_s: float = 0.5) -> None:
    """Die (SIGKILL) as soon as `owner`, a process of this machine, is gone.

    A pidfd (Linux 5.3+) becomes readable when the process exits, so a daemon thread blocked
    on it wakes at once; without pidfds the thread polls. The owner may already be gone by the
    time the pidfd is opened (or its pid reused): its start time is checked after."""
    pid = owner["pid"]
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if not alive(owner):
        _die()

    def wait_pidfd(fd: int) -> None:
        select.select([fd], [], [])
        _die()

    def poll() -> None:
        while alive(owner):
            time.sleep(poll_s)
        _die()

    if fd is not None:
        threading.Thread(target=wait_pidfd, args=(fd,), name="owner-watch", daemon=True).start()
    else:
        threading.Thread(target=poll, name="owner-watch", daemon=True).start()
