"""`colosim calibrate`: the core's error per mechanism, measured on this host.

Each micro-scenario isolates one mechanism the core models, runs it on the host (colosim-load
workloads in real cgroups) and in the simulator with this host's topology and scheduler, and
compares one or two numbers that mechanism decides. This is how the core's fidelity is tracked:
docs/replay.md records the figures.

Both sides vary from run to run: the host with the machine's other work (`--repeat` runs it
several times), the simulator with the seed (`--seeds`), which draws among other things the CFS
period timers' phase — on the host that phase is where CLOCK_MONOTONIC's multiples of the
period fall, arbitrary to when a workload starts. Each side is given as its median and range.
For a micro-scenario whose outcome hangs on that phase (`phase_of`), the host's phase is read
off its own requests' start times and the simulator is also run pinned to it, run by run.
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
    # a service whose requests' outcome depends on where they start in the CFS period
    phase_of: str | None = None


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
            phase_of="b",
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


PERIOD_NS = 100_000_000  # cpu.cfs_period_us's default, which every micro-scenario keeps


def time_to_boundary_ns(starts_s: Any, origin_s: float, period_ns: int = PERIOD_NS) -> int:
    """Median time from each request's start (s since `origin_s`, a CLOCK_MONOTONIC reading)
    to the next CFS period boundary, in (0, period]. A fresh group's period timer expires on
    CLOCK_MONOTONIC's multiples of the period (bandwidth.rs `start_cfs_bandwidth`)."""
    origin_ns = round(origin_s * 1e9)
    ds = [period_ns - (origin_ns + round(float(t) * 1e9)) % period_ns for t in starts_s]
    return int(statistics.median(ds)) if ds else 0


def request_starts_s(r: RunResult, service: str) -> Any:
    svc = r.services[service]
    return svc.completions_s - svc.latencies_s


def micro_scenario(m: Micro, duration: float, topology: dict[str, Any], phase_ns: int | None = None) -> Scenario:
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
    scenarios = [micro_scenario(m, duration, topo) for m in micros]
    rows: list[list[str]] = []
    doc: dict[str, dict[str, dict[str, Any]]] = {}
    load = os.getloadavg()
    with Session(log=say) as session:
        substituted = check_knobs(scenarios, missing_knobs(session), say)
        for m, sc in zip(micros, scenarios, strict=True):
            sc = host_equivalent(sc, substituted)
            host: dict[str, Spread] = {metric: Spread([]) for metric in m.metrics}
            at_phase: dict[str, Spread] = {metric: Spread([]) for metric in m.metrics}
            phases_ms: list[float] = []
            loads: list[float] = []
            for k in range(repeat):
                say(f"calibrate: {m.name} ({duration:g} s on the host, {k + 1} of {repeat}) ...")
                run = run_on_host(Variant(m.name, True, sc), 1, session, substituted)
                # The 1-minute load average just after (this run's own threads included): a
                # shared machine's other work shows here when a window was disturbed.
                loads.append(os.getloadavg()[0])
                for metric, f in m.metrics.items():
                    host[metric].runs.append(f(run.result, len(cpus)))
                if m.phase_of is not None:
                    # The simulator's spells start on whole seconds (a multiple of the period),
                    # so pinning the phase to the host's time-to-boundary reproduces it.
                    d = time_to_boundary_ns(request_starts_s(run.result, m.phase_of), run.t0)
                    phases_ms.append(d / 1e6)
                    pinned = host_equivalent(micro_scenario(m, duration, topo, d % PERIOD_NS), substituted)
                    r = run_variant(Variant(m.name, True, pinned), 1, substitute=frozenset(substituted))
                    for metric, f in m.metrics.items():
                        at_phase[metric].runs.append(f(r, len(cpus)))
            say(f"calibrate: {m.name}: load average {', '.join(f'{x:.1f}' for x in loads)} after the host runs")
            say(f"calibrate: {m.name} in the simulator, seeds 1..{seeds} ...")
            sims = [run_variant(Variant(m.name, True, sc), seed, substitute=frozenset(substituted)) for seed in range(1, seeds + 1)]
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
                }
                rows.append([m.name, metric, host[metric].show(), sim.show(), _pct(e)])
                if m.phase_of is not None:
                    ep = error(host[metric].median, at_phase[metric].median)
                    entry.update(
                        host_phase_ms=phases_ms, sim_at_host_phase=at_phase[metric].median, sim_at_host_phase_runs=at_phase[metric].runs
                    )
                    entry["error_at_host_phase"] = ep
                    rows.append(["", f"{metric} at the host's phase", host[metric].show(), at_phase[metric].show(), _pct(ep)])
                doc[m.name][metric] = entry
            if phases_ms:
                say(f"calibrate: {m.name}: host spells start {', '.join(f'{p:.1f}' for p in phases_ms)} ms before a period boundary")
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
