"""`colosim calibrate`: the core's error per mechanism, measured on this host.

Each micro-scenario isolates one mechanism the core models, runs it on the host (colosim-load
workloads in real cgroups) and in the simulator with this host's topology and scheduler, and
compares one or two numbers that mechanism decides. This is how the core's fidelity is tracked:
docs/replay.md records the figures.

Both sides vary from run to run: the host with the machine's other work (`--repeat` runs it
several times; the load average after each run is recorded), the simulator with the seed
(`--seeds`), which draws among other things each group's CFS period timer phase — on the host
(Linux >= 6.4) a random one per cgroup, so where a spell starts within the period differs run
to run. Each side is given as its median and range.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay import timer_slack
from replay.background import background_cpus, mean_background, with_background
from replay.cgroupfs import host_cpus
from replay.compare import error
from replay.host_kernel import host_kernel
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
            # Threads that run 1 ms and sleep 1 ms (a timer), twice as many as the CPUs, beside
            # as many hogs, the two groups at equal weight: how the node splits between a group
            # that sleeps and wakes and one that never sleeps. On one CPU both get half, on the
            # host and in the core; over two CPUs each group's weight is divided among them by
            # its load (calc_group_shares) and re-divided at every sleep and wakeup
            # (reweight_entity): a CPU whose sleepers' queue never empties goes to them
            # (6.18.44). The host's sleeps end late (timer_slack.py); the simulated ones end
            # as late, or exact times would keep every queue busy (docs/replay.md, "Calibration").
            "cpu.shares equal: sleepers beside hogs",
            {"sleepers": {"cpu.shares": 1024}, "hogs": {"cpu.shares": 1024}},
            {
                "s": {
                    "kind": "closed_loop",
                    "cgroup": "sleepers",
                    "clients": hogs,
                    "service": {"dist": "constant", "value": "20ms"},
                    "shape": {"bursts": 20, "wait": {"dist": "constant", "value": "1ms"}},
                },
                "h": {"kind": "hog", "cgroup": "hogs", "threads": hogs},
            },
            {"sleepers' CPU share": _share("sleepers"), "hogs' CPU share": _share("hogs")},
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


def micro_scenario(m: Micro, duration: float, topology: dict[str, Any], phase_ns: int | None = None) -> Scenario:
    """The micro-scenario on this topology; `phase_ns` pins the CFS period timers' phase."""
    doc: dict[str, Any] = {
        "scenario": {"name": "calibrate", "duration": f"{duration}s", "warmup": "1s", "sample_interval": "0s"},
        "cgroups": m.cgroups,
        "workloads": m.workloads,
    }
    for key, value in topology.items():
        apply_override(doc, parse_path(key), value, where="")
    if phase_ns is not None:
        doc.setdefault("kernel", {})["cfs_period_phase"] = f"{phase_ns}ns"
    return Scenario.from_document(doc)


@dataclass
class Spread:
    """One metric's values over runs (host repeats or simulator seeds)."""

    runs: list[float]

    @property
    def median(self) -> float:
        finite = [v for v in self.runs if math.isfinite(v)]
        return statistics.median(finite) if finite else math.nan

    def show(self) -> str:
        finite = [v for v in self.runs if math.isfinite(v)]
        if len(finite) < 2:
            return sig3(self.median)
        return f"{sig3(self.median)} [{sig3(min(finite))}–{sig3(max(finite))}]"


def calibrate(
    duration: float,
    out: Path | None,
    say: Callable[[str], Any] = lambda m: print(m, file=sys.stderr),
    seeds: int = 8,
    repeat: int = 1,
) -> int:
    from sim.runner import run_variant

    cpus = host_cpus()
    topo = host_topology(cpus)
    micros = micro_scenarios(len(cpus))
    say(host_kernel().summary())
    scenarios = [micro_scenario(m, duration, topo) for m in micros]
    # colosim-load's timed sleeps end late here; the simulated side sleeps as long
    # (replay/timer_slack.py), measured while the host is still quiet
    overshoot = timer_slack.measure() if any(timer_slack.any_timed(sc) for sc in scenarios) else None
    if overshoot is not None:
        say(overshoot.summary())
    rows: list[list[str]] = []
    doc: dict[str, dict[str, dict[str, Any]]] = {}
    load = os.getloadavg()
    with Session(log=say) as session:
        substituted = check_knobs(scenarios, missing_knobs(session), say)
        for m, sc in zip(micros, scenarios, strict=True):
            sc = host_equivalent(sc, substituted)
            host: dict[str, Spread] = {metric: Spread([]) for metric in m.metrics}
            loads: list[float] = []
            others: list[float] = []
            for k in range(repeat):
                say(f"calibrate: {m.name} ({duration:g} s on the host, {k + 1} of {repeat}) ...")
                run = run_on_host(Variant(m.name, True, sc), 1, session, substituted)
                # The 1-minute load average just after (this run's own threads included): a
                # shared machine's other work shows here when a window was disturbed.
                loads.append(os.getloadavg()[0])
                others.append(background_cpus(run.result.others_cpu_share, len(cpus)))
                for metric, f in m.metrics.items():
                    host[metric].runs.append(f(run.result, len(cpus)))
            say(f"calibrate: {m.name}: load average {', '.join(f'{x:.1f}' for x in loads)} after the host runs")
            # the host's other tenants of these runs run beside the simulated ones, as in every
            # replay prediction (replay/background.py)
            background = mean_background(others)
            say(f"calibrate: {m.name} in the simulator, seeds 1..{seeds}, {background:.3f} CPUs of other tenants beside it ...")
            late = timer_slack.timer_equivalent(sc, overshoot)
            simulated = with_background(late, background)
            sims = [run_variant(Variant(m.name, True, simulated), seed, substitute=frozenset(substituted)) for seed in range(1, seeds + 1)]
            doc[m.name] = {}
            for metric, f in m.metrics.items():
                sim = Spread([f(r, len(cpus)) for r in sims])
                e = error(host[metric].median, sim.median)
                entry: dict[str, Any] = {
                    "host": host[metric].median,
                    "sim": sim.median,
                    "error": e,
                    "host_runs": host[metric].runs,
                    "host_load_average": loads,
                    "sim_runs": sim.runs,
                    "sim_background_cpus": background,
                }
                if late is not sc and overshoot is not None:
                    # the simulated side's sleeps ended as late as the host's (timer_slack.py)
                    entry["sim_timer_overshoot_ns"] = {"mean": overshoot.mean_ns, "p50": overshoot.p50_ns, "p99": overshoot.p99_ns}
                rows.append([m.name, metric, host[metric].show(), sim.show(), _pct(e)])
                doc[m.name][metric] = entry
    print(
        f"colosim calibrate: {len(cpus)} CPUs, {topo['kernel.scheduler']}, {duration:g} s per mechanism, "
        f"host x{repeat}, simulator seeds 1..{seeds} (median [min–max]); load average {load[0]:.1f} at the start; "
        "error = sim / host - 1"
    )
    print(markdown(["mechanism", "metric", "host", "sim", "error"], rows))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        from sim.results import finite

        (out / "calibration.json").write_text(json.dumps(finite(doc), indent=2) + "\n")
        print(f"\nwrote {out / 'calibration.json'}")
    return 0


def _pct(e: float) -> str:
    return f"{e * 100:+.1f}%" if math.isfinite(e) else "-"
