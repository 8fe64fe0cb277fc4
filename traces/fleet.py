"""A fleet as a trace set: one trace file per machine of Alibaba cluster-trace-v2018's
machine_usage table (../shared/reference/traces.md §3.1), in one directory with a small
index, so `colosim tune --trace-set DIR` runs every machine's day in every trial.

Each file holds the machine as one `node` entity named `machine` (ENTITY) — the same name in
every file, since a scenario's trace-driven workload names its entity once and plays it from
each file of the set; the machine's id is the file's name and is in the index. The per-machine
conversion (util% × 96 cores, resampled with a bounded hold) is alibaba2018's, read in one
pass over the table for all machines.
"""

from __future__ import annotations

import json
from pathlib import Path

from traces.alibaba2018 import CORES, Samples, machine_samples, node_entity, usage_file
from traces.format import TraceError

ENTITY = "machine"
INDEX = "index.json"
SUFFIXES = (".parquet", ".csv")


def _in_window(samples: Samples, start_s: float, end_s: float) -> list[float]:
    """The CPU readings (cores) of the window itself (not the hold-in before it)."""
    return [v for t, vs in samples[0].items() if start_s <= t < end_s for v in vs]


def choose(found: dict[str, Samples], machines: list[str] | int, start_s: float, end_s: float) -> list[str]:
    """The machines named (each must have readings in the window), or the N busiest: the
    highest mean CPU over the window's readings, the lower id first among equals."""
    readings = {m: _in_window(s, start_s, end_s) for m, s in found.items()}
    have = sorted(m for m, r in readings.items() if r)
    if isinstance(machines, int):
        if machines < 1:
            raise TraceError(f"--machines: a count must be >= 1 (got {machines})")
        if machines > len(have):
            raise TraceError(f"--machines {machines}: the table has {len(have)} machines with readings in the window")
        return sorted(have, key=lambda m: (-sum(readings[m]) / len(readings[m]), m))[:machines]
    if len(set(machines)) < len(machines):
        raise TraceError(f"--machines: a machine is named twice ({', '.join(machines)})")
    for m in machines:
        if m not in have:
            shown = ", ".join(have[:20]) + (" ..." if len(have) > 20 else "")
            raise TraceError(f"--machines: no readings of {m!r} in the window (machines there: {shown or 'none'})")
    return list(machines)


def split(
    directory: str | Path,
    machines: list[str] | int,
    out: str | Path,
    start_s: float,
    end_s: float,
    step_s: float = 60.0,
    node_memory_bytes: float = 64 * 2**30,
) -> list[dict[str, object]]:
    """Write OUT/<machine>.parquet for each machine and OUT/index.json; return the index's
    rows (machine, file, readings in the window, samples written, mean and max cores)."""
    d, out = Path(directory), Path(out)
    if not d.is_dir():
        raise TraceError(f"{d}: not a directory with cluster-trace-v2018 files")
    if not end_s > start_s or step_s <= 0:
        raise TraceError(f"window: need start < end and step > 0 (got {start_s:g}, {end_s:g}, {step_s:g})")
    usage = usage_file(d)
    if usage is None:
        raise TraceError(f"{d}: no machine_usage.csv (the fleet is split from it)")
    wanted = None if isinstance(machines, int) else set(machines)
    found = machine_samples(usage, wanted, start_s, end_s, step_s, node_memory_bytes)
    chosen = choose(found, machines, start_s, end_s)
    if out.exists() and not out.is_dir():
        raise TraceError(f"--out {out}: not a directory")
    stale = sorted(p.name for p in out.glob("*") if p.suffix in SUFFIXES and p.stem not in chosen) if out.exists() else []
    if stale:
        # a trace set is every trace file in the directory: a left-over one would join it
        raise TraceError(f"--out {out}: holds other traces ({', '.join(stale[:5])}); give an empty or new directory")
    out.mkdir(parents=True, exist_ok=True)
    from traces.format import Trace

    rows: list[dict[str, object]] = []
    for m in chosen:
        entity = node_entity(ENTITY, found[m], start_s, end_s, step_s, node_memory_bytes)
        if entity is None:  # readings in the window always give a first grid point
            raise TraceError(f"--machines: {m!r} has no sample on the {step_s:g} s grid of the window")
        trace = Trace(source=f"Alibaba cluster-trace-v2018 {usage}, machine {m}, [{start_s:g}, {end_s:g}) s")
        trace.add(entity)
        file = trace.write(out / f"{m}.parquet")
        readings = _in_window(found[m], start_s, end_s)
        rows.append(
            {
                "machine": m,
                "file": file.name,
                "readings": len(readings),
                "samples": len(entity),
                "mean_cpu_cores": float(entity.cpu_cores.mean()),
                "max_cpu_cores": float(entity.cpu_cores.max()),
            }
        )
    index = {
        "source": f"Alibaba cluster-trace-v2018 machine_usage ({usage})",
        "window_s": [start_s, end_s],
        "step_s": step_s,
        "entity": ENTITY,
        "cores": CORES,
        "machines": rows,
    }
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return rows


def trace_set(directory: str | Path) -> list[str]:
    """`--trace-set DIR`: every trace file in DIR, sorted by name (each named by machine: its
    file's stem)."""
    d = Path(directory)
    if not d.is_dir():
        raise TraceError(f"--trace-set {d}: not a directory")
    files = sorted(p for p in d.iterdir() if p.suffix in SUFFIXES and p.is_file())
    if not files:
        raise TraceError(f"--trace-set {d}: no trace files (.parquet or .csv) in it")
    return [str(p) for p in files]


def machine_name(trace: str) -> str:
    """A trace of a set named by its machine: the file's stem."""
    return Path(trace).stem
