"""Whole-scenario speed benchmark: simulated seconds per wall second and events per second.

    python experiments/bench.py [--repeat N] [--clock cpu] [--only NAME,...]

Runs (a) every run of experiments/clickhouse_stress.toml, (d) both runs of
experiments/io_bench.toml (a database service and dd writers on one disk), (c) both runs of
experiments/memory_bench.toml (memory on every cgroup vs CPU only), and (b) both runs of
experiments/open_loop_96cpu.toml (96 logical CPUs, 5,000 req/s on 48 workers, 96 hogs, 60
simulated seconds; without limits and with quotas and bursts on every group) through the
same Python path users take (scenario -> NodeEnvironment -> core), REPEAT times each, and
prints the median. open_loop_96cpu runs once more with a contention profile on every
workload (LLC and memory bandwidth, contention.rs): the [interference] target is at most
1.5x the wall time of the same run without. The machine is shared and noisy: compare ratios within one run.
`--clock cpu` times the process's CPU (time.process_time) instead of wall time: steadier
when other tenants load the machine (it still counts cache and SMT contention), so two
builds compared by alternating runs agree within a few per cent. `--only` keeps the
scenario files named (without .toml).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from sim import NodeEnvironment, load_scenario
from sim.environment import NS_PER_S

HERE = Path(__file__).resolve().parent
# A web service that reuses its cache and stress hogs that stream through memory.
PROFILED = [
    "workloads.web.contention={llc_apki=5.0,footprint_mb=2.0}",
    "workloads.stress.contention={llc_apki=20.0,footprint_mb=4096.0,mlp=4.0}",
]


def time_run(variant, clock=time.perf_counter) -> tuple[float, int, float]:
    """Wall seconds (or what `clock` counts), events and simulated seconds of one run (node
    build included)."""
    duration = variant.scenario.scenario.duration / NS_PER_S
    start = clock()
    env = NodeEnvironment(variant.scenario.core_spec())
    env.run(until=duration)
    wall = clock() - start
    return wall, env.node.events(), duration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--only", help="comma-separated scenario names, e.g. clickhouse_stress,open_loop_96cpu")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    files = ("clickhouse_stress.toml", "open_loop_96cpu.toml", "memory_bench.toml", "io_bench.toml")
    if args.only:
        files = tuple(f for f in files if f.removesuffix(".toml") in args.only.split(","))
    rows = []
    runs = [(file, load_scenario(HERE / file)) for file in files]
    if "open_loop_96cpu.toml" in files:
        runs.append(("open_loop_96cpu.toml", load_scenario(HERE / "open_loop_96cpu.toml", PROFILED)))
    for file, scenario in runs:
        profiled = scenario.workloads["web"].contention is not None if file == "open_loop_96cpu.toml" else False
        for variant in scenario.variants():
            if profiled and variant.name != "no limits":
                continue
            walls, events, sim_s = [], 0, 0.0
            for _ in range(args.repeat):
                wall, events, sim_s = time_run(variant, clock)
                walls.append(wall)
            wall = statistics.median(walls)
            name = f"{scenario.name}: {variant.name}" + (", profiled" if profiled else "")
            rows.append((name, sim_s, wall, sim_s / wall, events / wall))
    width = max(len(r[0]) for r in rows)
    unit = "CPU s" if args.clock == "cpu" else "wall s"
    print(f"{'scenario: run':<{width}}  sim s  {unit} (median of {args.repeat})  sim s / {unit}  events / s")
    for name, sim_s, wall, speed, eps in rows:
        print(f"{name:<{width}}  {sim_s:5.0f}  {wall:22.3f}  {speed:14.0f}  {eps / 1e6:7.2f} M")
    # The [cpu2] target: quotas and bursts on every group cost at most 20% of the speed.
    walls = {name: wall for name, _, wall, _, _ in rows}
    plain = walls.get("open_loop_96cpu: no limits")
    limited = walls.get("open_loop_96cpu: quotas and bursts on every group")
    if plain and limited:
        print(f"\nquotas and bursts on every group / no limits, wall time: {limited / plain:.2f}x")
    # The [memory] target: memory on every cgroup within 30% of the same scenario without.
    cpu_only = walls.get("memory_bench: CPU only")
    memory = walls.get("memory_bench: memory on every cgroup")
    if cpu_only and memory:
        print(f"memory on every cgroup / CPU only, wall time: {memory / cpu_only:.2f}x")
    # The [interference] target: contention profiles on every workload at most 1.5x.
    profiled = walls.get("open_loop_96cpu: no limits, profiled")
    if plain and profiled:
        print(f"contention profiles on every workload / none, wall time: {profiled / plain:.2f}x")


if __name__ == "__main__":
    main()
