"""Contention profiles fitted to the host's split runs, and the other cases predicted with the
core's model (docs/replay.md, "Shared hardware on this host").

The host's split arrangement (replay/contention_host.py) runs one workload on CPU 0 and one on
CPU 1: they share no CPU time, only the LLC and the memory bus. The core's model of that
(core_rs/model/src/contention.rs; [workloads.X.contention]) gives each thread a CPI

    CPI = cpi_base + llc_apki/1000 x m(c) x L(u) x GHz / mlp,   m(c) = (1 + c/F)^-alpha

with c its LLC occupancy at the equilibrium with its co-runner and L(u) the loaded memory
latency; its speed is CPI_alone / CPI. A host rate per CPU-second (requests, bogo ops) is
proportional to that speed, so the measured ratio "contended / alone per CPU-second" is what
the model's speed ratio must match.

What is fitted, and from what: each workload's `llc_apki` (how often it goes to the LLC), from
ONE contended case — its own ratio there (FIT_CASES) — all workloads jointly (each one's ratio
depends on its co-runner's profile too). What is not: the footprint F of each workload comes
from what it is known to touch (FOOTPRINT_MB), alpha = 0.5 for all (Hartstein et al. 2008,
"On the nature of cache miss behavior: is it sqrt(2)?"), cpi_base = 1 and mlp = 1 (the
fitted apki absorbs them: only apki x mlp^-1 / cpi_base matters to the ratio at fixed L), and
the node (NODE: an LLC of 105 MB, a Sapphire Rapids socket's, since the VM's 480 MiB is the
hypervisor's figure). Everything else is predicted, and the prediction set beside the host's
median and spread (min-max over rounds)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sim.errors import ScenarioError

MIB = 1 << 20
# The node of the pair runs: 2 cores of one socket, its LLC and memory bus.
NODE: dict[str, Any] = {
    "cores_per_socket": 2,
    "ghz": 2.6,  # the host's TSC (lscpu BogoMIPS 5200 = 2 x 2.6 GHz)
    "llc": {"size_mb": 105.0},
    "memory_bandwidth": {"peak_gbps": 100.0},
}
# What each workload touches (MiB): nginx serves one 512-byte file (its code, buffers and the
# kernel's socket paths: a few MiB); redis holds REDIS_KEYS x REDIS_VALUE = ~100 MB of values
# plus its dict; stress-ng --cache sweeps 2 of the VM's 16 LLC ways (60 MiB); --stream's three
# arrays of 4 x 16 MiB; --matrix three 128 x 128 long-double matrices (~0.75 MiB); stress --cpu
# a sqrt loop in registers.
FOOTPRINT_MB = {"nginx": 4.0, "redis": 120.0, "cache": 60.0, "stream": 192.0, "matrix": 0.75, "cpu": 0.01}
MISS_EXPONENT = 0.5
# A workload without a host measurement of its own (stress --cpu reports no rate): a fixed
# profile, nearly no LLC traffic.
FIXED_APKI = {"cpu": 0.01}
# Each workload's one fitting case (split arrangement): case key and whose ratio.
FIT_CASES: dict[str, tuple[str, str]] = {
    "nginx": ("nginx/stream/split", "service_per_cpu"),
    "redis": ("redis/stream/split", "service_per_cpu"),
    "stream": ("nginx/stream/split", "antagonist_per_cpu"),
    "cache": ("nginx/cache/split", "antagonist_per_cpu"),
    "matrix": ("nginx/matrix/split", "antagonist_per_cpu"),
}


def profile(name: str, apki: float) -> dict[str, Any]:
    """The [workloads.X.contention] table of a workload with `apki` LLC accesses per 1000
    instructions."""
    return {"cpi_base": 1.0, "llc_apki": apki, "footprint_mb": FOOTPRINT_MB[name], "miss_exponent": MISS_EXPONENT, "mlp": 1.0}


def pair_document(profiles: Mapping[str, Mapping[str, Any]], node: Mapping[str, Any] = NODE) -> dict[str, Any]:
    """A scenario of one hog thread per profile, the i-th pinned to CPU i (the split
    arrangement), each in a cgroup named after it."""
    cgroups = {name: {"cpuset.cpus": str(i)} for i, name in enumerate(profiles)}
    workloads = {name: {"kind": "hog", "cgroup": name, "threads": 1, "contention": dict(p)} for name, p in profiles.items()}
    return {
        "scenario": {"name": "contention-fit", "duration": "1s", "sample_interval": "0s"},
        "node": dict(node),
        "cgroups": cgroups,
        "workloads": workloads,
    }


# Simulated seconds per pair run, counted after WARM_S: the core coalesces a co-runner's
# arrival into the next tick's refresh (Event::LlcRefresh), so each thread's first tick runs
# at its alone speed; counting after it leaves the steady state only.
WARM_S = 0.02
RUN_S = 0.2


def instructions(profiles: Mapping[str, Mapping[str, Any]], node: Mapping[str, Any] = NODE) -> dict[str, int]:
    """Each workload's instructions over RUN_S after WARM_S in the core (perf_counters per
    cgroup)."""
    from sim import NodeEnvironment
    from sim.scenario import Scenario

    env = NodeEnvironment(Scenario.from_document(pair_document(profiles, node)).core_spec())
    perf = env.node
    env.run(until=WARM_S)
    before = {name: int(perf.perf_counters(name)["instructions"]) for name in profiles}
    env.run(until=WARM_S + RUN_S)
    return {name: int(perf.perf_counters(name)["instructions"]) - before[name] for name in profiles}


def _key(name: str, p: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return name, tuple(sorted(p.items()))


@lru_cache(maxsize=4096)
def _alone(item: tuple[str, tuple[tuple[str, Any], ...]], node: tuple[tuple[str, Any], ...]) -> int:
    name, p = item
    return instructions({name: dict(p)}, _unfreeze(node))[name]


def _freeze(node: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in node.items()))


def _unfreeze(node: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, tuple) else v for k, v in node}


def speed_ratios(a: tuple[str, Mapping[str, Any]], b: tuple[str, Mapping[str, Any]], node: Mapping[str, Any] = NODE) -> tuple[float, float]:
    """The model's answer for a split case: each one's instructions beside the other over its
    instructions alone (the same CPU time: a hog on its own CPU runs all of RUN_S)."""
    (na, pa), (nb, pb) = a, b
    if na == nb:
        raise ValueError(f"a pair needs two names ({na!r} twice)")
    both = instructions({na: pa, nb: pb}, node)
    frozen = _freeze(node)
    return both[na] / _alone(_key(na, pa), frozen), both[nb] / _alone(_key(nb, pb), frozen)


@dataclass
class Observation:
    case: str  # "service/antagonist/split"
    role: str  # "service_per_cpu" or "antagonist_per_cpu"
    median: float
    low: float
    high: float

    @property
    def workload(self) -> str:
        svc, ant, _ = self.case.split("/")
        return svc if self.role.startswith("service") else ant

    @property
    def other(self) -> str:
        svc, ant, _ = self.case.split("/")
        return ant if self.role.startswith("service") else svc


def observations(doc: Mapping[str, Any]) -> list[Observation]:
    """The split cases' per-CPU ratios of a contention_host.json document."""
    out = []
    for case, roles in sorted(doc["ratio_values"].items()):
        if not case.endswith("/split"):
            continue
        for role in ("service_per_cpu", "antagonist_per_cpu"):
            v = sorted(roles.get(role) or [])
            if v:
                mid = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
                out.append(Observation(case, role, mid, v[0], v[-1]))
    return out


def model_ratio(obs: Observation, apki: Mapping[str, float], node: Mapping[str, Any] = NODE) -> float:
    w, o = obs.workload, obs.other
    mine, theirs = speed_ratios((w, profile(w, apki[w])), (o, profile(o, apki[o])), node)
    return mine


def fit(obs: list[Observation], fit_cases: Mapping[str, tuple[str, str]] = FIT_CASES, node: Mapping[str, Any] = NODE) -> dict[str, float]:
    """Each workload's llc_apki (FIXED_APKI for those without a measurement), the fitted ones
    jointly: least squares of log(model ratio / measured median) over their fitting cases."""
    from scipy.optimize import least_squares

    by = {(o.case, o.role): o for o in obs}
    names = [n for n in fit_cases if fit_cases[n] in by]
    missing = [f"{n} ({fit_cases[n][0]}, {fit_cases[n][1]})" for n in fit_cases if fit_cases[n] not in by]
    if missing:
        raise ValueError(f"no host ratio to fit: {', '.join(missing)}")
    lo, hi = math.log(1e-3), math.log(300.0)

    def apki_of(x) -> dict[str, float]:
        return {**FIXED_APKI, **{n: math.exp(v) for n, v in zip(names, x, strict=True)}}

    def residuals(x):
        a = apki_of(x)
        return [math.log(max(model_ratio(by[fit_cases[n]], a, node), 1e-9) / by[fit_cases[n]].median) for n in names]

    x0 = [math.log(5.0)] * len(names)
    sol = least_squares(residuals, x0, bounds=([lo] * len(names), [hi] * len(names)), diff_step=0.05, xtol=1e-6, ftol=1e-8)
    return apki_of(sol.x)


def predictions(
    obs: list[Observation], apki: Mapping[str, float], fit_cases: Mapping[str, tuple[str, str]] = FIT_CASES
) -> list[dict[str, Any]]:
    """Every observation beside the model: its ratio, error (model / host median - 1), whether
    inside the host's min-max, and whether it was a fitting case."""
    used = set(fit_cases.values())
    out = []
    for o in obs:
        if o.workload not in apki or o.other not in apki:
            continue
        m = model_ratio(o, apki)
        out.append(
            {
                "case": o.case,
                "ratio": o.role,
                "workload": o.workload,
                "fitted_here": (o.case, o.role) in used,
                "host_median": round(o.median, 4),
                "host_min": round(o.low, 4),
                "host_max": round(o.high, 4),
                "model": round(m, 4),
                "error": round(m / o.median - 1, 4),
                # the null model's error: no shared-hardware effect at all (ratio 1)
                "error_if_none": round(1 / o.median - 1, 4),
                "inside_spread": o.low <= m <= o.high,
            }
        )
    return out


def report(doc: Mapping[str, Any], say: Callable[[str], Any] = print) -> dict[str, Any]:
    """Fit, predict, and the markdown table of the result."""
    obs = observations(doc)
    apki = fit(obs)
    rows = predictions(obs, apki)
    held = [r for r in rows if not r["fitted_here"]]
    lines = [
        "| case | whose ratio | host median (min–max) | model | error | error of ratio 1 | fitted here |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['workload']} | {r['host_median']:.3f} ({r['host_min']:.3f}–{r['host_max']:.3f}) | "
            f"{r['model']:.3f} | {r['error']:+.1%} | {r['error_if_none']:+.1%} | {'yes' if r['fitted_here'] else ''} |"
        )
    say("\n".join(lines))
    within = sum(abs(r["error"]) <= 0.15 for r in held)
    null = sum(abs(r["error_if_none"]) <= 0.15 for r in held)
    fitted = ", ".join(f"{k} {v:.3g}" for k, v in sorted(apki.items()))
    say(f"held-out cases within 15%: {within} of {len(held)} (ratio 1 everywhere: {null}); fitted llc_apki: {fitted}")
    mae = sum(abs(r["error"]) for r in held) / max(1, len(held))
    mae_null = sum(abs(r["error_if_none"]) for r in held) / max(1, len(held))
    say(f"held-out mean |error|: model {mae:.1%}, ratio 1 everywhere {mae_null:.1%}")
    return {
        "node": NODE,
        "footprint_mb": FOOTPRINT_MB,
        "miss_exponent": MISS_EXPONENT,
        "llc_apki": apki,
        "rows": rows,
        "table": "\n".join(lines),
    }


def main(argv: list[str] | None = None) -> int:
    """python -m replay.contention_fit HOST.json [--out FIT.json]: fit and predict (needs the
    core's shared-hardware model)."""
    import argparse
    import json
    import sys
    from pathlib import Path

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("host", type=Path, help="experiments/data/contention_host.json (experiments/contention_host.py)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        doc = json.loads(a.host.read_text())
        result = report(doc)
    except (OSError, ValueError, KeyError, ScenarioError) as err:
        print(f"{a.host}: {err}", file=sys.stderr)
        return 2
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
