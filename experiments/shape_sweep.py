"""How a workload shape moves a scenario's prediction: one service's QPS, P50 and P99 in every
run, relative to the baseline run, for each shape tried (sim only).

    python experiments/shape_sweep.py SCENARIO.toml SERVICE [--set PATH=VALUE ...] \\
        [--shape BURSTSxWAIT ...] [--cgroup NAME]

A shape is written `4x2ms`: 4 bursts with an exponential wait of mean 2 ms between two (the
request's CPU, `service`, unchanged); `1` is the unshaped model. `--cgroup` adds the CPU
share of that cgroup (the batch's) per run; every row has the run-queue wait of the
service's cgroup per completed request (summed over its threads and bursts). Example (docs/model.md):

    python experiments/shape_sweep.py experiments/clickhouse_stress.toml clickhouse \\
        --shape 1 --shape 4x1ms --shape 16x1ms --cgroup offline
"""

from __future__ import annotations

import argparse

from sim import load_scenario, run_scenario


def shape_override(service: str, text: str) -> list[str]:
    """`4x2ms` as a `--set` override (none for `1`)."""
    bursts, _, wait = text.partition("x")
    if int(bursts) == 1:
        return []
    return [f'workloads.{service}.shape = {{ bursts = {int(bursts)}, wait = {{ dist = "exponential", mean = "{wait}" }} }}']


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("service")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--shape", action="append", default=[])
    parser.add_argument("--cgroup")
    args = parser.parse_args()
    # every row: the run-queue wait of the service's cgroup per request (all threads and bursts)
    head = "| shape | run | QPS | QPS / baseline | P50 (s) | P99 (s) | P50 baseline / run | run-queue wait / request (ms) |"
    print(head + (f" {args.cgroup} CPU |" if args.cgroup else ""))
    print("|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.cgroup else ""))
    for shape in args.shape or ["1"]:
        # --set PATH=VALUE as `colosim run` takes it (VALUE in TOML)
        scenario = load_scenario(args.scenario, [*args.overrides, *shape_override(args.service, shape)])
        result = run_scenario(scenario, progress=False)
        base = result.runs[result.baseline].services[args.service]
        home = scenario.workloads[args.service].cgroup
        for name, run in result.runs.items():
            s = run.services[args.service]
            wait_ms = run.cgroups[home].wait_s / max(s.completed, 1) * 1e3
            row = f"| {shape} | {name} | {s.qps:.2f} | {s.qps / base.qps:.3f} | {s.p50_s:.3f} | {s.p99_s:.3f} | {base.p50_s / s.p50_s:.3f} | {wait_ms:.1f} |"
            if args.cgroup:
                row += f" {run.cgroups[args.cgroup].cpu_share:.3f} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
