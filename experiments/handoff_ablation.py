"""The host's wake-handoff arrangements (docs/replay.md, "Why stress got 10% here and 50% there")
in the core, per EEVDF release and with each 6.12+ mechanism switched off in turn: stress's part
of the two CPUs beside a group whose tasks wake each other (docs/model.md, "EEVDF releases").

    PYTHONPATH=. python experiments/handoff_ablation.py [--seconds 20] [--seeds 3]

Arrangements (2 CPUs; `online` and `offline` at cpu.shares 1024; `stress --cpu 10` in offline):
- pairs~: the same with lognormal bursts (mean 2 ms, σ 0.3);
- pairs-<x>ms: the same with x ms per side (more handoffs, so more group reweights: see
  docs/model.md for why this stands in for the host's PELT-driven reweights);
- pairs~<x>ms: x ms per side on average, lognormal with σ 0.1 (the host's scan,
  `probe_arrangements.py --arrangements pingpong-same@<x·1000>`, docs/model.md);
- pairs: 10 closed loops of one client whose generator burns 2 ms then wakes its server thread,
  which burns 2 ms and wakes it back — experiments/pingpong.py's two sides, both in `online`;
- duty: 20 threads given 2 ms per 4 ms period on a timer (the fair control).
Not expressible in the core: a closed loop's generator runs in the workload's own cgroup (no
"split" arrangement), and cpusets are per cgroup (no per-pair pinning).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from sim._core import Node

S = 1_000_000_000
MS = 1_000_000
HOST = {"pairs": "0.232", "duty": "0.482"}

# (label, version, sched_features overrides); "+ PELT" rows take group shares from PELT load
# averages ([kernel] group_shares = "pelt"), the others from instantaneous queue weights
VARIANTS: list[tuple[str, str, dict[str, bool]]] = [
    ("6.6", "6.6", {}),
    ("6.12", "6.12", {}),
    ("6.18.44", "6.18.44", {}),
    ("6.18.45 (reweight revert)", "6.18.45", {}),
    ("6.12 + PELT", "6.12", {}),
    ("6.18.44 + PELT", "6.18.44", {}),
    ("6.18.45 + PELT", "6.18.45", {}),
    ("6.18.44 −DELAY_DEQUEUE", "6.18.44", {"DELAY_DEQUEUE": False}),
    ("6.18.44 −DELAY_ZERO", "6.18.44", {"DELAY_ZERO": False}),
    ("6.18.44 −PICK_BUDDY", "6.18.44", {"PICK_BUDDY": False}),
    ("6.18.44 −PLACE_REL_DEADLINE", "6.18.44", {"PLACE_REL_DEADLINE": False}),
    ("6.18.44 −RUN_TO_PARITY", "6.18.44", {"RUN_TO_PARITY": False}),
    ("6.18.44 −PREEMPT_SHORT", "6.18.44", {"PREEMPT_SHORT": False}),
    # the placement before wake_affine was modelled (balance.rs): every wakeup stays near prev
    ("6.12 −wake_affine", "6.12", {"WA_IDLE": False, "WA_WEIGHT": False}),
    ("6.18.44 −wake_affine", "6.18.44", {"WA_IDLE": False, "WA_WEIGHT": False}),
]


def spec(
    arrangement: str, version: str, features: dict[str, bool], seed: int, group_shares: str = "instant", clock: bool = True
) -> dict[str, Any]:
    # "pairs" burns 2 ms per side like experiments/pingpong.py; "pairs-<x>ms" burns x ms
    burn = (
        round(float(arrangement[6:].removesuffix("ms")) * MS)
        if arrangement[:6] in ("pairs-", "pairs~") and len(arrangement) > 6
        else 2 * MS
    )
    # "pairs~": 2 ms on average, lognormal (σ 0.3): the host's bursts are not all alike;
    # "pairs~<x>ms": x ms on average, σ 0.1
    const: dict[str, Any] = {"dist": "constant", "value_ns": burn}
    if arrangement == "pairs~":
        const = {"dist": "lognormal", "mean_ns": 2e6, "sigma": 0.3}
    elif arrangement.startswith("pairs~"):
        const = {"dist": "lognormal", "mean_ns": float(burn), "sigma": 0.1}
    cgroups: list[dict[str, Any]] = [{"name": "online"}, {"name": "offline"}]
    hog = {"kind": "hog", "name": "stress", "cgroup": "offline", "threads": 10}
    if arrangement == "duty":
        chatty: list[dict[str, Any]] = [
            {"kind": "duty", "name": "duty", "cgroup": "online", "max_threads": 20, "cores": 10.0, "period_ns": 4 * MS}
        ]
    else:
        loop = {"kind": "closed_loop", "name": "pingpong", "cgroup": "online", "clients": 10, "service": const, "client_cpu": const}
        chatty = [loop]
    return {
        "seed": seed,
        "topology": {"cores_per_socket": 2},
        "kernel": {
            "scheduler": "eevdf",
            "version": version,
            "sched_features": features,
            "group_shares": group_shares,
            # pingpong.py's burn loop reads its thread's CPU clock (time.thread_time)
            "cpu_clock_readers": [chatty[0]["name"]] if clock else [],
        },
        "cgroups": cgroups,
        "workloads": [*chatty, hog],
    }


def stress_share(doc: dict[str, Any], seconds: float) -> float:
    node = Node(json.dumps(doc))
    node.run_until(2 * S)  # warm-up, as the probe's
    before = {g: node.cgroup_stats(g)["usage_ns"] for g in ("online", "offline")}
    node.run_until(2 * S + int(seconds * S))
    used = {g: node.cgroup_stats(g)["usage_ns"] - before[g] for g in before}
    return used["offline"] / (seconds * S * node.ncpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--arrangements", default="pairs,pairs~,pairs-1.5ms,pairs-1ms,duty")
    ap.add_argument("--variants", default="", help="only the variants whose label contains this text")
    args = ap.parse_args()
    arrangements = args.arrangements.split(",")
    print("| variant | " + " | ".join(arrangements) + " |")
    print("|---|" + "---:|" * len(arrangements))
    print("| host 6.18.44 (docs/replay.md) | " + " | ".join(HOST.get(a, "—") for a in arrangements) + " |")
    for label, version, features in VARIANTS:
        if args.variants not in label:
            continue
        group_shares = "pelt" if label.endswith("+ PELT") else "instant"
        cells = []
        for a in arrangements:
            shares = [stress_share(spec(a, version, features, seed, group_shares), args.seconds) for seed in range(1, args.seeds + 1)]
            cells.append(f"{statistics.median(shares):.3f} [{min(shares):.3f}–{max(shares):.3f}]")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
