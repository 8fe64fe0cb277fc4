"""Google cluster-data 2019 (ClusterData2019 v3, CC-BY-4.0 — keep the attribution
"Google cluster-data, ClusterData2019" with any sample) → the trace format, for one machine of
a cell (../shared/reference/traces.md §3.7, §4).

The 2019 trace lives in BigQuery only; export the rows of one machine as CSV with a header,
nested fields named with dots as BigQuery flattens them:

* instance_usage.csv: start_time, end_time (µs), collection_id, instance_index, machine_id,
  average_usage.cpus, average_usage.memory, assigned_memory — 300 s windows;
* instance_events.csv: time, type, collection_id, instance_index, machine_id,
  scheduling_class, priority, resource_request.cpus, resource_request.memory;
* machine_events.csv: time, machine_id, type, capacity.cpus, capacity.memory.

Each instance (collection_id/instance_index) is an entity: cpu = average_usage.cpus /
capacity.cpus × the node's cores (both in normalised compute units, so the ratio is
unit-free), memory likewise against capacity.memory × the node's memory, at its window's
start. Role: scheduling class ≥ 2 or a production priority (120–359) is online; the rest
(best effort, batch, free) offline. Requests and limits come from the latest event.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from traces.format import Entity, Trace, TraceError

US = 1e-6


def _table(path: Path, need: tuple[str, ...]):
    if not path.exists():
        raise TraceError(f"{path}: no such file (export it from BigQuery as CSV with a header)")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{path}: missing column {missing[0]!r} (columns as BigQuery exports them, nested fields with dots)")
        yield from enumerate(reader, start=2)


def _num(path: Path, n: int, col: str, text: str) -> float | None:
    if text is None or text.strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{path} row {n}, column {col}: not a number ({text!r})") from None


def load(directory: str | Path, machine: str, start_s: float, end_s: float, node_cores: float, node_memory_bytes: float) -> Trace:
    d = Path(directory)
    cap_cpu = cap_mem = None
    path = d / "machine_events.csv"
    for n, row in _table(path, ("time", "machine_id", "capacity.cpus", "capacity.memory")):
        if row["machine_id"] == machine and (_num(path, n, "time", row["time"]) or 0) * US < end_s:
            cap_cpu = _num(path, n, "capacity.cpus", row["capacity.cpus"]) or cap_cpu
            cap_mem = _num(path, n, "capacity.memory", row["capacity.memory"]) or cap_mem
    if not cap_cpu or not cap_mem:
        raise TraceError(f"{path}: no capacity for machine {machine!r}")
    meta: dict[str, dict] = {}
    path = d / "instance_events.csv"
    for n, row in _table(path, ("time", "collection_id", "instance_index", "machine_id", "scheduling_class", "priority")):
        key = f"{row['collection_id']}/{row['instance_index']}"
        t = (_num(path, n, "time", row["time"]) or 0) * US
        if t >= end_s or (key in meta and t < meta[key]["t"]):
            continue
        sc = int(_num(path, n, "scheduling_class", row["scheduling_class"]) or 0)
        prio = int(_num(path, n, "priority", row["priority"]) or 0)
        meta[key] = {
            "t": t,
            "online": sc >= 2 or 120 <= prio <= 359,
            "cpu_request": (_num(path, n, "resource_request.cpus", row.get("resource_request.cpus", "")) or 0) / cap_cpu * node_cores
            or None,
            "memory_request": (_num(path, n, "resource_request.memory", row.get("resource_request.memory", "")) or 0)
            / cap_mem
            * node_memory_bytes
            or None,
        }
    samples: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    limits: dict[str, float] = {}
    path = d / "instance_usage.csv"
    for n, row in _table(
        path, ("start_time", "collection_id", "instance_index", "machine_id", "average_usage.cpus", "average_usage.memory")
    ):
        if row["machine_id"] != machine:
            continue
        t = (_num(path, n, "start_time", row["start_time"]) or 0) * US
        if not start_s <= t < end_s:
            continue
        key = f"{row['collection_id']}/{row['instance_index']}"
        cpu = (_num(path, n, "average_usage.cpus", row["average_usage.cpus"]) or 0.0) / cap_cpu * node_cores
        mem = (_num(path, n, "average_usage.memory", row["average_usage.memory"]) or 0.0) / cap_mem * node_memory_bytes
        samples[key].append((t - start_s, cpu, mem))
        assigned = _num(path, n, "assigned_memory", row.get("assigned_memory", ""))
        if assigned:
            limits[key] = assigned / cap_mem * node_memory_bytes
    trace = Trace(source=f"Google cluster-data ClusterData2019 (CC-BY-4.0) {d}, machine {machine}, [{start_s:g}, {end_s:g}) s")
    for key in sorted(samples):
        rows = sorted(samples[key])
        t_s = np.array([r[0] for r in rows])
        keep = np.concatenate([[True], np.diff(t_s) > 0])  # a repeated window start: keep the first
        m = meta.get(key, {"online": False, "cpu_request": None, "memory_request": None})
        trace.add(
            Entity(
                key,
                "online" if m["online"] else "offline",
                t_s[keep],
                np.array([r[1] for r in rows])[keep],
                np.array([r[2] for r in rows])[keep],
                cpu_request=m["cpu_request"],
                memory_request=m["memory_request"],
                memory_limit=limits.get(key),
            )
        )
    if not trace.entities:
        raise TraceError(f"{d}: no usage of machine {machine!r} in [{start_s:g}, {end_s:g}) s")
    return trace
