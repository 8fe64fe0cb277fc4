"""What a wakeup across CPUs costs its two ends on this host (`[node.remote_wakeup]`,
core_rs/model/src/remote_wakeup.rs), measured.

A writer pinned to one CPU writes a byte down a pipe every GAP_S to a reader blocked in read()
on another CPU; each write wakes the reader across CPUs. The writer's CPU for each write is
timed with its own CPU clock (CLOCK_THREAD_CPUTIME_ID, exact to the nanosecond, not the tick's
sample that getrusage gives on a TICK_CPU_ACCOUNTING kernel); the reader's CPU for all its
wakeups is its schedstat run time. The same is done with both on one CPU, where a wakeup is a
local enqueue: the costs are the differences — what sending the interrupt costs the waker, and
what being woken by it costs the wakee (its switch in, the pipe's lines from the other CPU's
cache). Once more with a SCHED_IDLE spinner on the reader's CPU: the wakee's cost when a hog's
lines are in its caches. Measured here (a Firecracker guest): ~11–13 µs to send, ~7.5 µs to
take on an idle CPU, ~16 µs beside a hog (docs/replay.md, "A wakeup across CPUs").

Processes only (no cgroup is made or written), pinned with sched_setaffinity, killed on every
exit path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from replay.cpuidle import busy_cpus, child_process, pin, spin_idle, two_cpus

WAKEUPS = 4000
GAP_S = 100e-6  # between writes: the reader is asleep again before the next


@dataclass(frozen=True)
class RemoteWakeupCost:
    """Per wakeup (µs): the waker's write and the wakee's CPU, with the reader on the same CPU
    (`local_*`), on another idle one, and on another running a SCHED_IDLE spinner (`busy_*`)."""

    cpus: tuple[int, int]
    wakeups: int
    local_waker_us: float
    local_wakee_us: float
    waker_us: float
    wakee_us: float
    busy_waker_us: float
    busy_wakee_us: float
    others_busy_cpus: float = 0.0

    @property
    def waker_cost_us(self) -> float:
        return max(0.0, self.waker_us - self.local_waker_us)

    @property
    def wakee_cost_us(self) -> float:
        return max(0.0, self.wakee_us - self.local_wakee_us)

    def toml(self) -> str:
        return f'[node.remote_wakeup]\nwakee = "{self.wakee_cost_us * 1e3:.0f}ns"\nwaker = "{self.waker_cost_us * 1e3:.0f}ns"\n'

    def summary(self) -> str:
        busy = f"; WARNING: the host was busy ({self.others_busy_cpus:.2f} CPUs of other work)" if self.others_busy_cpus > 0.2 else ""
        return (
            f"remote wakeup: the waker's write {self.waker_us:.1f} µs against {self.local_waker_us:.1f} on one CPU, "
            f"the wakee {self.wakee_us:.1f} µs a wakeup against {self.local_wakee_us:.1f} "
            f"({self.busy_wakee_us:.1f} beside a SCHED_IDLE spinner); {self.wakeups} wakeups each{busy}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "waker_cost_us": self.waker_cost_us, "wakee_cost_us": self.wakee_cost_us}


def _run_ns(pid: int) -> int:
    """A process's time on CPU so far (schedstat's first field, ns)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _drained(rd: int, timeout_s: float = 2.0) -> None:
    """Wait (at most `timeout_s`) until the pipe holds no unread byte (FIONREAD)."""
    deadline = time.monotonic() + timeout_s
    while struct.unpack("i", fcntl.ioctl(rd, termios.FIONREAD, b"\0\0\0\0"))[0] > 0 and time.monotonic() < deadline:
        time.sleep(0.001)


def _reader(cpu: int, rd: int) -> None:
    pin(cpu)
    while os.read(rd, 1):
        pass


def _one(writer_cpu: int, reader_cpu: int, n: int, hog: bool) -> tuple[float, float]:
    """The writer's µs a write and the reader's µs a wakeup."""
    rd, wr = os.pipe()
    try:
        with contextlib.ExitStack() as stack:
            if hog:
                stack.enter_context(child_process(lambda: spin_idle(reader_cpu)))
            pid = stack.enter_context(child_process(lambda: _reader(reader_cpu, rd)))
            pin(writer_cpu)
            time.sleep(0.02)
            r0 = _run_ns(pid)
            spent = 0
            clock, cpu = time.perf_counter, time.thread_time_ns
            for _ in range(n):
                t = clock() + GAP_S
                while clock() < t:
                    pass
                c0 = cpu()
                os.write(wr, b"x")
                spent += cpu() - c0
            # the reader's run time counts once it has read every byte: on a busy CPU it may
            # not have run at all yet (a write's wakeup need not preempt the spinning writer)
            _drained(rd)
            time.sleep(0.01)
            reader = _run_ns(pid) - r0
    finally:
        os.close(rd)
        os.close(wr)
    return spent / n / 1e3, reader / n / 1e3


def measure(cpus: tuple[int, int] | None = None, wakeups: int = WAKEUPS) -> RemoteWakeupCost:
    """Measure the costs between two CPUs this process may run on (the first two by default)."""
    a, b = cpus or two_cpus("remote wakeup: the cost of a wakeup across CPUs")
    others = busy_cpus()
    old = os.sched_getaffinity(0)
    try:
        local = _one(a, a, wakeups, False)
        remote = _one(a, b, wakeups, False)
        busy = _one(a, b, wakeups, True)
    finally:
        os.sched_setaffinity(0, old)
    return RemoteWakeupCost((a, b), wakeups, *local, *remote, *busy, others_busy_cpus=others)
