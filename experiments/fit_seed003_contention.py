"""The one-time fit of seed 003's contention profiles (docs/experiments.md, "koordinator_cpu_curve").

    python experiments/fit_seed003_contention.py [--samples N] [--seed S]

Random search over a small grid of the service's profile (llc_apki, footprint_mb,
miss_exponent), the offline job's (llc_apki, mlp, core_pressure) and the node's memory
bandwidth (peak_gbps, queue_factor), LLC fixed at 30 MB / 20 ways; each candidate runs the
plain-colocation row twice — once to refit the service's CPU per request so that it alone
serves 272/s, once to score — and the score is the largest error, in percentage points, of
requests/s relative to alone against the seed's 88/148/214/263 at 30/20/10/4 offline cores.
Prints every improvement.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from sim import NodeEnvironment, load_scenario
from sim.environment import NS_PER_S

SCENARIO = Path(__file__).resolve().parent / "koordinator_cpu_curve.toml"
SEED = {"30c": 88, "20c": 148, "10c": 214, "4c": 263, "0c": 272}


def plain_row(sets: list[str]) -> dict[str, float]:
    """Requests/s of the plain-colocation runs after warm-up, by column."""
    out = {}
    for v in load_scenario(SCENARIO, sets).variants():
        if v.grid is None or v.grid[0] != "plain colocation":
            continue
        s = v.scenario
        env = NodeEnvironment(s.core_spec())
        warm, end = s.scenario.warmup / NS_PER_S, s.scenario.duration / NS_PER_S
        env.run(until=warm)
        env.node.reset_stats()
        env.run(until=end)
        out[v.grid[1]] = env.node.service_stats("wrk")["completed"] / (end - warm)
    return out


def score(web: tuple[float, ...], offline: tuple[float, ...], node: tuple[float, ...]) -> tuple[float, float, dict[str, int]]:
    sets = [
        f"workloads.wrk.contention={{llc_apki={web[0]},footprint_mb={web[1]},miss_exponent={web[2]}}}",
        f"workloads.offline.contention={{llc_apki={offline[0]},footprint_mb=4096.0,mlp={offline[1]},core_pressure={offline[2]}}}",
        f"node.memory_bandwidth={{peak_gbps={node[0]},queue_factor={node[1]}}}",
    ]
    first = plain_row([*sets, 'workloads.wrk.service={dist="lognormal",mean="29ms",sigma=0.5}'])
    mean = 29.0 * first["0c"] / SEED["0c"]  # a saturated closed loop: rate ∝ 1 / CPU per request
    row = plain_row([*sets, f'workloads.wrk.service={{dist="lognormal",mean="{mean:.2f}ms",sigma=0.5}}'])
    err = max(abs(row[c] / row["0c"] - SEED[c] / SEED["0c"]) * 100 for c in SEED)
    return err, mean, {c: round(v) for c, v in row.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=120)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    best = None
    for _ in range(args.samples):
        web = (rng.choice([4.0, 6.0, 8.0]), rng.choice([0.25, 0.5, 1.0]), rng.choice([0.5, 1.0]))
        offline = (rng.choice([3.0, 5.0, 8.0]), rng.choice([4.0, 8.0, 16.0]), rng.choice([1.0, 1.5, 2.0]))
        node = (rng.choice([40.0, 60.0, 80.0]), rng.choice([0.25, 0.5]))
        err, mean, row = score(web, offline, node)
        if best is None or err < best:
            best = err
            print(f"{err:5.1f} points: service {web} offline {offline} node {node} CPU/request {mean:.1f} ms {row}", flush=True)


if __name__ == "__main__":
    main()
