"""EEVDF custom slices on the host: `[workloads.X] sched_runtime_ns` as sched_attr.sched_runtime.

A workload's slice is set by colosim-load (core_rs/load/src/slice.rs): its own workloads take
`--slice-ns N` and set it on their main thread before any other starts; every other program
replay starts for the workload — a real server, stress, dd's shell loop, a load generator —
runs under the wrapper `colosim-load --slice-ns N -- ARGV...`, which sets its own slice and
execs ARGV. The kernel (6.12+) copies se.slice into every child and thread (`__sched_fork`
leaves it alone; only SCHED_FLAG_RESET_ON_FORK resets it in `sched_fork`) and exec keeps it,
so the server's worker processes and threads have the slice too — src/slice.rs cites the source.

The load generator of a real server gets the slice as well: it runs in the workload's cgroup
and the simulator counts its CPU (`client_cpu`) among the workload's threads, all of which
take the workload's slice.

Before the run, `check` refuses a host whose kernel predates custom slices (6.6 – 6.11 ignore
sched_runtime for SCHED_OTHER without an error) and runs the wrapper once (`-- true`), so that
a sched_setattr the host refuses (EPERM under a seccomp filter, EINVAL, a non-fair policy) is
one message naming the workload and the value, before anything starts.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import Any

from replay.cgroupfs import HostError
from replay.host_kernel import parse_version

# the first release with custom slices (commit 857b158dc5e8, kernel-and-anchors.md)
FIRST_RELEASE = (6, 12)


def check(where: str, ns: int, load: Sequence[str], release: str | None = None) -> None:
    """`where`.sched_runtime_ns = `ns` can be set on this host by `load` (colosim-load's
    command); `release`: the kernel's (uname -r unless given)."""
    release = release or os.uname().release
    if parse_version(release) < FIRST_RELEASE:
        raise HostError(
            f"{where}.sched_runtime_ns = {ns}: this host runs Linux {release}, and custom slices (sched_attr.sched_runtime "
            "of a fair task) need 6.12 or later — the kernel would ignore the value"
        )
    done = subprocess.run([*load, *flag(ns), "--", "true"], capture_output=True, text=True)
    if done.returncode != 0:
        said = done.stderr.strip().removeprefix("colosim-load: error: ") or f"exit status {done.returncode}"
        raise HostError(f"{where}.sched_runtime_ns = {ns}: the host refused the slice: {said}")


def flag(ns: int) -> list[str]:
    """colosim-load's own option for the slice."""
    return ["--slice-ns", str(ns)]


def wrap(argv: Sequence[str], ns: int, load: Sequence[str]) -> list[str]:
    """`argv` run under the wrapper that gives it the slice `ns`."""
    return [*load, *flag(ns), "--", *argv]


class SlicedSession:
    """A replay session whose every spawned program runs with the slice `ns` (the rest of the
    session as it is)."""

    def __init__(self, session: Any, ns: int, load: Sequence[str]) -> None:
        self._session = session
        self._ns = ns
        self._load = list(load)

    def spawn(self, argv: Sequence[str], cgroup: str, **kw: Any) -> Any:
        return self._session.spawn(wrap(argv, self._ns, self._load), cgroup, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
