"""Record the golden results that tests/test_golden.py compares with, bit for bit.

    PYTHONPATH=. python tests/data/make_golden.py [--check]

Speed work on the core (issue 21: a faster core WITHOUT changing results) must leave every
result of every run the same for the same scenario and seed. This script runs a few short
scenarios through the path users take (`sim.runner.run_variant`: node build, warm-up, the
policy and trace processes, the run in chunks) and records, per run, a SHA-256 over
everything a user reads: every service's latencies and completion times, every cgroup's
counters, per-CPU busy time, the time series, memory, IO and OOM kills (and a few readable
figures beside it, so a diff says roughly what moved). It deliberately leaves out the
core's event count: skipping events that change nothing is allowed, changing results is not.

The files were written by this script from the core BEFORE the speed work started; when the
model itself changes (a new mechanism, a fixed bug), regenerate them and say so in the commit.
`--check` compares instead of writing (what the test does).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden_results.json"

# (file, overrides, runs to keep (None: all)): short, but long enough for every mechanism
# of the scenario to act (the clickhouse runs pass ~400 queries, the 96-CPU node ~10,000
# requests and its hogs' quota periods, memory_bench its memory.high throttling).
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "clickhouse_stress": ("clickhouse_stress.toml", {"scenario.duration": "20s", "scenario.warmup": "1s"}),
    "open_loop_96cpu": ("open_loop_96cpu.toml", {"scenario.duration": "3s", "scenario.warmup": "0.5s"}),
    "memory_bench": ("memory_bench.toml", {"scenario.duration": "6s"}),
    "io_bench": ("io_bench.toml", {"scenario.duration": "2s", "scenario.warmup": "0.5s"}),
    "eevdf_6_18_44": (
        "clickhouse_stress.toml",
        {
            "scenario.duration": "10s",
            "scenario.warmup": "1s",
            "kernel.scheduler": "eevdf",
            "kernel.version": "6.18.44",
        },
    ),
    "pelt_shares": (
        "open_loop_96cpu.toml",
        {"scenario.duration": "2s", "scenario.warmup": "0.5s", "kernel.group_shares": "pelt"},
    ),
    "pelt_shares_eevdf": (
        "clickhouse_stress.toml",
        {
            "scenario.duration": "10s",
            "scenario.warmup": "1s",
            "kernel.scheduler": "eevdf",
            "kernel.version": "6.18.44",
            "kernel.group_shares": "pelt",
        },
    ),
}


def _canonical(value: Any) -> Any:
    """Value as JSON-able data with every float exact (repr round-trips) and every array's
    bytes hashed with its dtype and shape."""
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return {"dtype": str(value.dtype), "shape": list(value.shape), "sha256": digest}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return "nan" if math.isnan(f) else repr(f)
    if isinstance(value, np.integer):
        return int(value)
    return value


def run_digest(run: Any) -> dict[str, Any]:
    """What one RunResult holds, hashed, with a few figures in the clear."""
    ts = run.timeseries
    full = {
        "result": run.to_dict(),
        "latencies": {n: s.latencies_s for n, s in run.services.items()},
        "completions": {n: s.completions_s for n, s in run.services.items()},
        "cpu_busy_s": run.cpu_busy_s,
        "timeseries": {k: getattr(ts, k) for k in ts.__dataclass_fields__},
        "duration_s": run.duration_s,
        "warmup_s": run.warmup_s,
    }
    text = json.dumps(_canonical(full), sort_keys=True)
    return {
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "completed": {n: s.completed for n, s in run.services.items()},
        "cpu_s": {n: repr(c.cpu_s) for n, c in run.cgroups.items()},
    }


def compute(names: list[str] | None = None, seed_offset: int = 0) -> dict[str, dict[str, Any]]:
    """Digests of the cases named (all by default), each at its scenario's seed plus
    `seed_offset` (the test's check that the digest sees a different run)."""
    from sim import load_scenario
    from sim.runner import run_variant

    out: dict[str, dict[str, Any]] = {}
    for name, (file, overrides) in CASES.items():
        if names is not None and name not in names:
            continue
        scenario = load_scenario(ROOT / "experiments" / file, overrides)
        seed = scenario.seed + seed_offset
        out[name] = {v.name: run_digest(run_variant(v, seed)) for v in scenario.variants()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the recorded file instead of writing it")
    args = parser.parse_args()
    results = compute()
    if args.check:
        recorded = json.loads(GOLDEN.read_text())
        bad = [f"{c}: {r}" for c in results for r in results[c] if recorded.get(c, {}).get(r) != results[c][r]]
        print("\n".join(bad) or "all runs identical")
        sys.exit(1 if bad else 0)
    GOLDEN.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
