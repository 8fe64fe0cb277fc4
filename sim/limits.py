"""How big a node and its workloads may be: the limits real kernels have, so that an absurd
scenario gets one message naming the field instead of a MemoryError or a core abort.

The core (core_rs/model/src/spec.rs) checks the same bounds, for callers of `sim._core` that
skip the scenario schema; these are the scenario's own, checked first.
"""

from __future__ import annotations

import json
import re
from typing import Any

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


_AT_COLUMN = re.compile(r"^core spec: (.*) at line 1 column (\d+)$")


def name_core_field(message: str, spec: dict[str, Any]) -> str:
    """The core's message on a spec it could not read ("core spec: number out of range at
    line 1 column 2084") with the field it was at instead of the column, as the spec's path
    ("workloads[2].every_ns"); other messages as they are."""
    m = _AT_COLUMN.match(message)
    if m is None:
        return message
    # The value it names, if one field holds it (serde reports a tagged workload's fields
    # at the end of the workload), else the place it stopped reading.
    number = re.search(r"(?:integer|floating point) `([^`]+)`", m.group(1))
    found = _paths_of(spec, float(number.group(1))) if number else []
    if len(found) == 1:
        path = found[0]
    else:
        path = _path_at(json.dumps(spec), int(m.group(2)) - 1)  # the text NodeEnvironment sends
    top = re.match(r"^(\w+)\[(\d+)\]", path)
    if top and top.group(1) in spec and isinstance(spec[top.group(1)], list):
        item = spec[top.group(1)][int(top.group(2))]
        if isinstance(item, dict) and "name" in item:  # which cgroup or workload
            path = f"{top.group(0)} ({json.dumps(item['name'])}){path[top.end() :]}"
    return f"{path}: {m.group(1)}" if path else message


def _paths_of(doc: Any, value: float, path: str = "") -> list[str]:
    """Paths of the numbers in `doc` equal to `value`."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _paths_of(v, value, f"{path}.{_key(k)}" if path else _key(k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _paths_of(v, value, f"{path}[{i}]")]
    if isinstance(doc, (int, float)) and not isinstance(doc, bool) and float(doc) == value:
        return [path]
    return []


def _key(k: str) -> str:
    return json.dumps(k) if "." in k else k


def _path_at(text: str, end: int) -> str:
    """The path of the JSON value being read at offset `end` of `text`."""
    frames: list[list[Any]] = []  # ["{", key] or ["[", index], outermost first
    i = 0
    while i < min(end, len(text)):
        c = text[i]
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if frames and frames[-1][0] == "{" and text[j + 1 : j + 3].lstrip().startswith(":"):
                frames[-1][1] = json.loads(text[i : j + 1])
            i = j + 1
            continue
        if c == "{":
            frames.append(["{", None])
        elif c == "[":
            frames.append(["[", 0])
        elif c in "}]" and frames:
            frames.pop()
        elif c == "," and frames:
            frames[-1][1] = frames[-1][1] + 1 if frames[-1][0] == "[" else None
        i += 1
    out = ""
    for kind, at in frames:
        if kind == "[":
            out += f"[{at}]"
        elif at is not None:
            out += f".{_key(at)}" if out else _key(at)
    return out
