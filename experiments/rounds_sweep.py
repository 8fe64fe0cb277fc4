"""The model's ClickHouse + stress without isolation as the client<->server exchange comes in
more rounds (docs/replay.md, "The client's rounds"): the fidelity suite's ClickHouse scenario
with a fixed calibration (service lognormal 74 ms per thread, sigma 0.45, client_cpu 92 ms per
query: what the suite fitted on a quieter host), on 2 CPUs with this host's EEVDF.

    python experiments/rounds_sweep.py [--versions 6.12,6.18.44,6.18.44-wake_affine] [--rounds 1,10,25,45,90] [--seeds 3] [--fanout ncpus]

(--fanout ncpus, two threads of 74 ms, is the table in docs/replay.md; the suite's scenario now
has the measured fanout 1, at which the same CPU is one thread of 148 ms: --fanout 1.)

A version ending in "-wake_affine" runs that release with WA_IDLE and WA_WEIGHT off (the
placement before wake_affine was modelled).
"""

from __future__ import annotations

import argparse
import statistics
import tomllib

from replay.workloads import REPO
from sim.runner import run_variant
from sim.scenario import Scenario


def stress_case(version: str, rounds: int, seed: int, fanout: str = "ncpus") -> tuple[float, float, float]:
    doc = tomllib.loads((REPO / "experiments" / "fidelity" / "clickhouse.toml").read_text())
    doc["node"] = {"cores_per_socket": 2}
    release, _, off = version.partition("-")
    features = {"WA_IDLE": False, "WA_WEIGHT": False} if off == "wake_affine" else {}
    doc["kernel"] = {"scheduler": "eevdf", "version": release, "base_slice": "1.4ms", "autogroup": True, "sched_features": features}
    w = doc["workloads"]["clickhouse"]
    w["fanout"] = fanout if fanout == "ncpus" else int(fanout)
    w["service"] = {"dist": "lognormal", "mean": "74ms" if fanout == "ncpus" else f"{74 * 2 // int(fanout)}ms", "sigma": 0.45}
    w["client_cpu"] = {"dist": "constant", "value": "92ms"}
    w["rounds"] = rounds
    v = next(v for v in Scenario.from_document(doc).variants() if v.name == "stress")
    got = run_variant(v, seed)
    s = got.services["clickhouse"]
    return s.qps, s.percentile(50), got.cgroups["offline"].cpu_share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="6.12,6.18.44,6.18.44-wake_affine")
    ap.add_argument("--rounds", default="1,10,25,45,90")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fanout", default="ncpus", help="ncpus (the table in docs/replay.md) or a number")
    args = ap.parse_args()
    print("| kernel | rounds | QPS | P50 (s) | stress's share |")
    print("|---|---:|---:|---:|---:|")
    for version in args.versions.split(","):
        for r in (int(x) for x in args.rounds.split(",")):
            runs = [stress_case(version, r, seed, args.fanout) for seed in range(1, args.seeds + 1)]
            qps, p50, share = (statistics.mean(x) for x in zip(*runs, strict=True))
            print(f"| {version} | {r} | {qps:.2f} | {p50:.3f} | {share:.3f} |", flush=True)


if __name__ == "__main__":
    main()
