"""Alibaba cluster-trace-v2018 → the trace format, for one machine over a time window
(../shared/reference/traces.md §3.1 and §4; the dataset's own schema.txt). The files are
CSVs without a header, read from where the user keeps them (Alibaba's terms: research and
study only — never copied into this repository).

* machine_usage (machine_id, time_stamp, cpu_util_percent, mem_util_percent, …) → entity
  `<machine>` with role `node`: cpu = util% × cores, memory = util% × the node's memory.
* container_meta (container_id, machine_id, time_stamp, app_du, status, cpu_request,
  cpu_limit, mem_size) + container_usage (container_id, machine_id, time_stamp,
  cpu_util_percent, mem_util_percent, …) → one `online` entity per container on the machine:
  cpu = util% × cpu_request/100 cores, capped at cpu_limit/100; memory = util% × mem_size/100
  × the node's memory (mem_size is normalised to the machine); request and limit from the
  latest meta row.
* batch_instance (instance_name, task_name, job_name, task_type, status, start_time,
  end_time, machine_id, seq_no, total_seq_no, cpu_avg, cpu_max, mem_avg, mem_max) → one
  `offline` entity `batch` for the machine: the sum of cpu_avg/100 cores of the Terminated
  instances running at each step (mem_avg likewise).

Samples are irregular (10 s quantised, ~60 s apart, with hours-long holes) and unsorted:
they are sorted, averaged when a timestamp repeats, and resampled onto `step_s` by holding
the last value for at most 3 steps; longer holes are left out (no samples there).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from traces.format import Entity, Trace, TraceError

CORES = 96  # every v2018 machine (machine_meta.csv: cpu_num 96)
HOLD_STEPS = 3


def _rows(path: Path, ncols: int):
    with path.open(newline="") as f:
        for n, cells in enumerate(csv.reader(f), start=1):
            if len(cells) < ncols:
                raise TraceError(f"{path} row {n}: {len(cells)} columns, expected {ncols} (is this {path.name} of cluster-trace-v2018?)")
            yield n, cells


def _num(path: Path, n: int, col: str, text: str) -> float | None:
    if text.strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{path} row {n}, column {col}: not a number ({text!r})") from None


def resample(samples: dict[float, list[float]], start: float, end: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Average repeated timestamps, then last-value-hold onto the grid for ≤ HOLD_STEPS."""
    if not samples:
        return np.empty(0), np.empty(0)
    ts = np.array(sorted(samples))
    vs = np.array([float(np.mean(samples[t])) for t in ts])
    grid = np.arange(start, end, step)
    idx = np.searchsorted(ts, grid, side="right") - 1
    ok = (idx >= 0) & (grid - ts[np.clip(idx, 0, None)] <= HOLD_STEPS * step)
    return grid[ok] - start, vs[idx[ok]]


def usage_file(d: Path) -> Path | None:
    """machine_usage.csv, or a part of it (the sample beside the project is its head)."""
    return next((p for p in (d / "machine_usage.csv", *sorted(d.glob("machine_usage*.csv"))) if p.exists()), None)


# a machine's raw samples: time -> CPU values (cores), time -> memory values (bytes)
Samples = tuple[dict[float, list[float]], dict[float, list[float]]]


def machine_samples(
    usage: Path, machines: set[str] | None, start_s: float, end_s: float, step_s: float, node_memory_bytes: float
) -> dict[str, Samples]:
    """One pass over machine_usage: each machine's (of `machines`, or every one) samples in
    the window (and up to HOLD_STEPS before it, which a hold carries in), in cores and bytes;
    out-of-range percentages (the trace's -1 and 101) are left out."""
    out: dict[str, Samples] = {}
    for n, c in _rows(usage, 4):
        if machines is not None and c[0] not in machines:
            continue
        t = _num(usage, n, "time_stamp", c[1])
        if t is None or not start_s - HOLD_STEPS * step_s <= t < end_s:
            continue
        cpu, mem = out.setdefault(c[0], (defaultdict(list), defaultdict(list)))
        u = _num(usage, n, "cpu_util_percent", c[2])
        m = _num(usage, n, "mem_util_percent", c[3])
        if u is not None and 0 <= u <= 100:
            cpu[t].append(u / 100 * CORES)
        if m is not None and 0 <= m <= 100:
            mem[t].append(m / 100 * node_memory_bytes)
    return out


def node_entity(name: str, samples: Samples, start_s: float, end_s: float, step_s: float, node_memory_bytes: float) -> Entity | None:
    """The machine as a `node` entity on the step grid (None: no CPU sample in the window)."""
    cpu, mem = samples
    t_c, v_c = resample(cpu, start_s, end_s, step_s)
    if not len(t_c):
        return None
    t_m, v_m = resample(mem, start_s, end_s, step_s)
    mem_on_grid = np.full(len(t_c), np.nan)
    pos = {t: i for i, t in enumerate(t_c)}
    for t, v in zip(t_m, v_m, strict=True):
        if t in pos:
            mem_on_grid[pos[t]] = v
    return Entity(
        name,
        "node",
        t_c,
        v_c,
        mem_on_grid if not np.isnan(mem_on_grid).all() else None,
        cpu_limit=float(CORES),
        memory_limit=node_memory_bytes,
    )


def load(
    directory: str | Path, machine: str, start_s: float, end_s: float, step_s: float = 60.0, node_memory_bytes: float = 64 * 2**30
) -> Trace:
    d = Path(directory)
    if not d.is_dir():
        raise TraceError(f"{d}: not a directory with cluster-trace-v2018 files")
    if not end_s > start_s or step_s <= 0:
        raise TraceError(f"window: need start < end and step > 0 (got {start_s:g}, {end_s:g}, {step_s:g})")
    trace = Trace(source=f"Alibaba cluster-trace-v2018 {d}, machine {machine}, [{start_s:g}, {end_s:g}) s")
    usage = usage_file(d)
    if usage is not None:
        samples = machine_samples(usage, {machine}, start_s, end_s, step_s, node_memory_bytes).get(machine)
        node = node_entity(machine, samples, start_s, end_s, step_s, node_memory_bytes) if samples else None
        if node is not None:
            trace.add(node)
    _containers(d, machine, start_s, end_s, step_s, node_memory_bytes, trace)
    _batch(d, machine, start_s, end_s, step_s, node_memory_bytes, trace)
    if not trace.entities:
        raise TraceError(f"{d}: nothing for machine {machine!r} in [{start_s:g}, {end_s:g}) s")
    return trace


def _containers(d: Path, machine: str, start: float, end: float, step: float, node_mem: float, trace: Trace) -> None:
    meta_path, usage_path = d / "container_meta.csv", d / "container_usage.csv"
    if not (meta_path.exists() and usage_path.exists()):
        return
    meta: dict[str, tuple[float, float, float]] = {}
    latest: dict[str, float] = {}
    for n, c in _rows(meta_path, 8):
        if c[1] != machine:
            continue
        t_meta = _num(meta_path, n, "time_stamp", c[2]) or 0.0
        if t_meta >= end or t_meta < latest.get(c[0], -1.0):
            continue
        req, lim, size = (_num(meta_path, n, col, c[i]) for col, i in (("cpu_request", 5), ("cpu_limit", 6), ("mem_size", 7)))
        latest[c[0]] = t_meta
        meta[c[0]] = (req or 0.0, lim or 0.0, size or 0.0)
    cpu: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    mem: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for n, c in _rows(usage_path, 5):
        if c[1] != machine or c[0] not in meta:
            continue
        t = _num(usage_path, n, "time_stamp", c[2])
        if t is None or not start - HOLD_STEPS * step <= t < end:
            continue
        req, lim, size = meta[c[0]]
        u = _num(usage_path, n, "cpu_util_percent", c[3])
        m = _num(usage_path, n, "mem_util_percent", c[4])
        if u is not None and u >= 0:
            cores = u / 100 * req / 100
            cpu[c[0]][t].append(min(cores, lim / 100) if lim > 0 else cores)
        if m is not None and m >= 0:
            mem[c[0]][t].append(m / 100 * size / 100 * node_mem)
    for cid in sorted(cpu):
        t_c, v_c = resample(cpu[cid], start, end, step)
        if not len(t_c):
            continue
        t_m, v_m = resample(mem[cid], start, end, step)
        lookup = dict(zip(t_m, v_m, strict=True))
        mem_grid = np.array([lookup.get(t, np.nan) for t in t_c])
        req, lim, size = meta[cid]
        trace.add(
            Entity(
                cid,
                "online",
                t_c,
                v_c,
                None if np.isnan(mem_grid).all() else mem_grid,
                cpu_request=req / 100,
                cpu_limit=lim / 100 if lim > 0 else None,
                memory_limit=size / 100 * node_mem,
            )
        )


def _batch(d: Path, machine: str, start: float, end: float, step: float, node_mem: float, trace: Trace) -> None:
    path = d / "batch_instance.csv"
    if not path.exists():
        return
    grid = np.arange(start, end, step)
    cpu = np.zeros(len(grid))
    mem = np.zeros(len(grid))
    any_instance = False
    for n, c in _rows(path, 14):
        if c[7] != machine or c[4] != "Terminated":
            continue
        t0, t1 = _num(path, n, "start_time", c[5]), _num(path, n, "end_time", c[6])
        if t0 is None or t1 is None or t1 <= t0 or t1 <= start or t0 >= end:
            continue
        cores = (_num(path, n, "cpu_avg", c[10]) or 0.0) / 100
        m = (_num(path, n, "mem_avg", c[12]) or 0.0) / 100 * node_mem
        on = (grid >= t0) & (grid < t1)
        cpu[on] += cores
        mem[on] += m
        any_instance = True
    if any_instance:
        trace.add(Entity("batch", "offline", grid - start, cpu, mem))
