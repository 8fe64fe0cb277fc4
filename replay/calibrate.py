"""`colosim calibrate`: the core's error per mechanism, measured on this host.

Each micro-scenario isolates one mechanism the core models, runs it on the host (colosim-load
workloads in real cgroups) and in the simulator with this host's topology and scheduler, and
compares one or two numbers that mechanism decides. This is how the core's fidelity is tracked:
docs/replay.md records the figures.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.cgroupfs import host_cpus
from replay.compare import error
from replay.host_run import check_knobs, host_equivalent, host_topology, missing_knobs, run_on_host
from replay.session import Session
from sim.overrides import apply_override, parse_path
from sim.results import RunResult, markdown, sig3
from sim.scenario import Scenario, Variant


@dataclass(frozen=True)
class Micro:
    name: str
    cgroups: dict[str, dict[str, Any]]
    workloads: dict[str, dict[str, Any]]
    metrics: dict[str, Callable[[RunResult, int], float]]


def _share(cg: str) -> Callable[[RunResult, int], float]:
    return lambda r, n: r.cgroups[cg].cpu_share


def micro_scenarios(ncpus: int) -> list[Micro]:
    hogs = 2 * ncpus  # more runnable threads than CPUs in each group
    return [
        Micro(
            "cpu.shares 1024:512",
            {"a": {"cpu.shares": 1024}, "b": {"cpu.shares": 512}},
            {"ha": {"kind": "hog", "cgroup": "a", "threads": hogs}, "hb": {"kind": "hog", "cgroup": "b", "threads": hogs}},
            {"CPU a / CPU b": lambda r, n: r.cgroups["a"].cpu_s / r.cgroups["b"].cpu_s},
        ),
        Micro(
            "cpu.idle=1 beside hogs",
            {"normal": {}, "idle": {"cpu.idle": 1}},
            {"hn": {"kind": "hog", "cgroup": "normal", "threads": hogs}, "hi": {"kind": "hog", "cgroup": "idle", "threads": hogs}},
            {"idle group's CPU share": _share("idle"), "normal group's CPU share": _share("normal")},
        ),
        Micro(
            "cpu.cfs_quota_us 50% of a CPU",
            {"q": {"cpu.cfs_quota_us": 50_000, "cpu.cfs_period_us": 100_000}},
            {"h": {"kind": "hog", "cgroup": "q", "threads": hogs}},
            {
                "CPUs used": lambda r, n: r.cgroups["q"].cpu_share * n,
                "nr_throttled per s": lambda r, n: r.cgroups["q"].nr_throttled / r.measured_s,
            },
        ),
        Micro(
            "quota + cpu.cfs_burst_us, bursty load",
            {"s": {"cpu.cfs_quota_us": 100_000, "cpu.cfs_burst_us": 100_000}},
            {"b": {"kind": "bursty", "cgroup": "s", "steady_threads": 0, "burst_threads": 2 * ncpus, "every": "1s", "length": "80ms"}},
            {
                "spell P50 (s)": lambda r, n: r.services["b"].p50_s,
                "nr_throttled per s": lambda r, n: r.cgroups["s"].nr_throttled / r.measured_s,
            },
        ),
        Micro(
            "cpuset.cpus pinning",
            {"pinned": {"cpuset.cpus": "0"}, "free": {}},
            {"hp": {"kind": "hog", "cgroup": "pinned", "threads": 2}, "hf": {"kind": "hog", "cgroup": "free", "threads": hogs}},
            {
                "pinned group's CPUs": lambda r, n: r.cgroups["pinned"].cpu_share * n,
                "free group's CPUs": lambda r, n: r.cgroups["free"].cpu_share * n,
            },
        ),
    ]


def micro_scenario(m: Micro, duration: float, topology: dict[str, Any]) -> Scenario:
    doc: dict[str, Any] = {
        "scenario": {"name": "calibrate", "duration": f"{duration}s", "warmup": "1s", "sample_interval": "0s"},
        "cgroups": m.cgroups,
        "workloads": m.workloads,
    }
    for key, value in topology.items():
        apply_override(doc, parse_path(key), value, where="")
    return Scenario.from_document(doc)


def calibrate(duration: float, out: Path | None, say: Callable[[str], Any] = lambda m: print(m, file=sys.stderr)) -> int:
    from sim.runner import run_variant

    cpus = host_cpus()
    topo = host_topology(cpus)
    micros = micro_scenarios(len(cpus))
    scenarios = [micro_scenario(m, duration, topo) for m in micros]
    rows: list[list[str]] = []
    doc: dict[str, dict[str, dict[str, float]]] = {}
    with Session(log=say) as session:
        substituted = check_knobs(scenarios, missing_knobs(session), say)
        for m, sc in zip(micros, scenarios, strict=True):
            say(f"calibrate: {m.name} ({duration:g} s on the host) ...")
            sc = host_equivalent(sc, substituted)
            host = run_on_host(Variant(m.name, True, sc), 1, session, substituted).result
            sim = run_variant(Variant(m.name, True, sc), 1, substitute=frozenset(substituted))
            doc[m.name] = {}
            for metric, f in m.metrics.items():
                h, s = f(host, len(cpus)), f(sim, len(cpus))
                e = error(h, s)
                doc[m.name][metric] = {"host": h, "sim": s, "error": e}
                rows.append([m.name, metric, sig3(h), sig3(s), f"{e * 100:+.1f}%" if math.isfinite(e) else "-"])
    print(f"colosim calibrate: {len(cpus)} CPUs, {topo['kernel.scheduler']}, {duration:g} s per mechanism; error = sim / host - 1")
    print(markdown(["mechanism", "metric", "host", "sim", "error"], rows))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        from sim.results import finite

        (out / "calibration.json").write_text(json.dumps(finite(doc), indent=2) + "\n")
        print(f"\nwrote {out / 'calibration.json'}")
    return 0
