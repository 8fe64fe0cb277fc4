"""How big a node and its workloads may be: the limits real kernels have, so that an absurd
scenario gets one message naming the field instead of a MemoryError or a core abort.

The core (core_rs/model/src/spec.rs) checks the same bounds, for callers of `sim._core` that
skip the scenario schema; these are the scenario's own, checked first.
"""

from __future__ import annotations

# Logical CPUs: x86's NR_CPUS upper bound with CONFIG_MAXSMP (arch/x86/Kconfig,
# NR_CPUS_RANGE_END = 8192).
NR_CPUS = 8192
# NUMA nodes: MAX_NUMNODES with x86's largest CONFIG_NODES_SHIFT (10).
MAX_NUMNODES = 1024
# SMT threads a core has: 8 on POWER8 and later (x86 has 2, Xeon Phi 4).
MAX_SMT = 8
# Threads of all workloads together (and any one count: clients, flows): the kernel's
# PID_MAX_LIMIT on 64-bit (include/linux/threads.h: 4 x 1024 x 1024).
PID_MAX_LIMIT = 4 * 1024 * 1024
# An open loop's backlog: net.core.somaxconn's default since Linux 5.4 (commit 19f92a030ca6
# "net: increase SOMAXCONN to 4096"; 128 before), the cap of a server's listen() backlog.
DEFAULT_BACKLOG = 4096
# The largest backlog the core keeps (8 bytes a waiting request: 128 MiB).
MAX_BACKLOG = 1 << 24


def topology_errors(sockets: int, numa_nodes_per_socket: int, cores_per_socket: int, threads_per_core: int) -> list[tuple[tuple[str], str]]:
    """The node's size against NR_CPUS and MAX_NUMNODES, as (field path, message) pairs."""
    errors: list[tuple[tuple[str], str]] = []
    ncpus = sockets * cores_per_socket * threads_per_core
    if ncpus > NR_CPUS:
        errors.append(
            (
                ("cores_per_socket",),
                f"{sockets} sockets x {cores_per_socket} cores x {threads_per_core} threads = {ncpus} logical CPUs; "
                f"at most {NR_CPUS} (the kernel's NR_CPUS)",
            )
        )
    nnodes = sockets * numa_nodes_per_socket
    if nnodes > MAX_NUMNODES:
        errors.append(
            (
                ("numa_nodes_per_socket",),
                f"{sockets} sockets x {numa_nodes_per_socket} = {nnodes} NUMA nodes; at most {MAX_NUMNODES} (MAX_NUMNODES)",
            )
        )
    return errors


# What a run may keep of its sampled series (the core's MEMORY_BUDGET, node.rs).
MEMORY_BUDGET = 1 << 30


def series_error(duration_ns: int, sample_interval_ns: int, ncgroups: int, nservices: int, per_cgroup: int) -> str | None:
    """Why sampling every `sample_interval_ns` for `duration_ns` would keep more than the
    core allows (as the core counts it: a row is the time, `per_cgroup` counters for each
    cgroup and the root, and a count per service), or None."""
    if sample_interval_ns <= 0:
        return None
    rows = duration_ns // sample_interval_ns + 1
    size = rows * 8 * (1 + (ncgroups + 1) * per_cgroup + nservices)
    if size <= MEMORY_BUDGET:
        return None
    return (
        f"sampling every {sample_interval_ns} ns for {duration_ns / 1e9:g} s keeps {rows} samples ({size >> 20} MiB), "
        f"more than the {MEMORY_BUDGET >> 20} MiB a run may keep; sample less often"
    )
