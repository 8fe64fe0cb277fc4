"""`colosim fidelity`: every prediction scored against this host.

For each service (a scenario in experiments/fidelity/, one [[runs]] entry per case) every case
runs on the host `reps` times — repetition by repetition, every service's cases in turn, so
that a disturbance of the shared machine spreads over the cases instead of sinking one — all
in one replay session (replay.session: its lock, its cgroups beneath ours, cleaned up on
every exit path). Then each service's model is calibrated ONCE, on its alone runs, by
replay.compare.predict (the one way replay calibrates: the median of the alone repetitions'
percentiles stands for "the alone run"), and every case is predicted with `seeds` seeds. No
case is ever fitted: the colocated cases are pure predictions. The service's CPU per request is
measured from its cgroup in the alone runs (replay.calibration.service_cpu), and every host run
records the other tenants' busy CPUs (replay.background): each case is predicted beside its own
runs' mean background, a measured input like the node's CPU count ("background CPUs" in the
table, the JSON and the report).

Scores (replay.scoring): per (service, case, metric) the host's mean and bootstrap interval
over the repetitions, the prediction's over the seeds, the error, inside / within 10%; per
service, whether the simulator ranks the cases as the host does; overall, the median |error|
and the counts, over the colocated cases (the alone case is the calibration's own target).

The JSON is rewritten after every host run (written whole to a temporary file, then renamed),
so an interrupt or a crash keeps every finished run; a run that fails is recorded with its
error and the suite goes on with the next; on Ctrl-C the finished runs are still scored and
reported, then the interrupt goes on.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies.cgroup import Knob
from replay.background import background_cpus, mean_background
from replay.calibration import PERCENTILES as FITTED_PERCENTILES
from replay.calibration import AloneRun
from replay.cgroupfs import host_cpus
from replay.compare import (
    QUEUE_EMPTY,
    QUEUE_MEAN,
    QUEUE_SD,
    alone_runs,
    error,
    fit_alone_runs,
    load_for_host,
    metrics,
    others_burst,
    precheck,
    predict,
    queue_figures,
)
from replay.cpuidle import measure as measure_exit_latency
from replay.host_kernel import host_kernel
from replay.host_run import check_knobs, host_equivalent, missing_knobs, run_on_host
from replay.scoring import GOAL, WITHIN, Score, goal_text, median_abs_error, meets_goal, ranking, score
from replay.session import Session
from replay.steal import measure as measure_stalls
from replay.workloads import REPO, MeasuredService, ReportedService
from sim.errors import ColosimError, ScenarioError
from sim.regimes import Claim, Regimes, batch_claim, in_regime, majority, regimes
from sim.results import RunResult, ServiceResult, finite, markdown, sig3
from sim.scenario import Scenario, Variant

FIDELITY_DIR = REPO / "experiments" / "fidelity"
SERVICES = ("clickhouse", "nginx", "redis", "postgres")  # the default suite: the real services
CASES = ("alone", "stress", "idle", "shares", "quota")
# metric shown -> the key replay.compare.metrics gives it
BATCH = "offline CPU (share)"  # the batch's share of the node, as the suite names it
METRICS = {"QPS": "QPS", "P50 (s)": "P50 (s)", "P99 (s)": "P99 (s)", BATCH: "batch CPU (share)"}
ERROR_METRICS = ("QPS", "P50 (s)", "P99 (s)")  # the overall median |error|
RANKED = ("QPS", "P99 (s)")  # the metrics the cases are ranked by


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def known_services() -> list[str]:
    return sorted(p.stem for p in FIDELITY_DIR.glob("*.toml"))


def service_path(name: str) -> Path:
    """A service of the suite: a name in experiments/fidelity/, or a path to a scenario file."""
    if name.endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise ScenarioError(f"--services: {name}: no such scenario file")
        return path
    path = FIDELITY_DIR / f"{name}.toml"
    if not path.is_file():
        raise ScenarioError(f"--services: unknown service {name!r} (known: {', '.join(known_services())}; or a path to a .toml)")
    return path


@dataclass
class Service:
    """One service of the suite: its scenario (with this host's topology) and the cases run."""

    name: str
    path: Path
    scenario: Scenario
    cases: list[str]
    baseline: str
    variants: dict[str, Variant]
    host: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # case -> per rep
    alone: list[RunResult] = field(default_factory=list)  # the baseline's host runs (calibration)
    failures: list[dict[str, Any]] = field(default_factory=list)
    sim: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # case -> per seed
    calibration: dict[str, dict[str, float]] = field(default_factory=dict)  # seed -> factors
    # case -> per rep: the other tenants' mean busy CPUs during the host run (replay.background),
    # a measured input every case's prediction runs beside it
    background: dict[str, list[float]] = field(default_factory=dict)
    # case -> per rep: the part of it that was this replay's own process (its sampling, the
    # alone runs' trace reader): a measurement that disturbs its run shows here
    replay_cpus: dict[str, list[float]] = field(default_factory=dict)
    scores: dict[str, dict[str, Score]] = field(default_factory=dict)  # case -> metric -> score
    # case -> the batch's regime in each host repetition and each seed (sim.regimes), for
    # the cases whose batch has one to tell
    regimes: dict[str, Regimes] = field(default_factory=dict)
    note: str = ""
    # what the calibration took from the pooled alone runs: {"ncpus", "services": {name:
    # AloneRun.to_dict()}}, kept in fidelity.json so that --repredict redoes the prediction
    # from the same host measurements
    alone_measured: dict[str, Any] = field(default_factory=dict)


def load_service(name: str, cases: list[str] | None, overrides: list[str]) -> Service:
    path = service_path(name)
    scenario = load_for_host(path, overrides)
    variants = {v.name: v for v in scenario.variants()}
    baseline = next(v.name for v in variants.values() if v.baseline)
    if cases is None:
        wanted = list(variants)
    else:
        for c in cases:
            if c not in variants:
                raise ScenarioError(f"--cases: no case {c!r} in {path} (its cases: {', '.join(variants)})")
        # the alone run is always measured: it is what the prediction is calibrated on
        wanted = [baseline, *(c for c in cases if c != baseline)]
    return Service(name if not name.endswith(".toml") else path.stem, path, scenario, wanted, baseline, variants)


def _pick(values: dict[str, float]) -> dict[str, float]:
    return {m: values.get(key, math.nan) for m, key in METRICS.items()}


def pooled_alone(runs: list[RunResult]) -> RunResult:
    """The alone repetitions as one run for the calibration: each service's QPS, latency
    percentiles and load generator's CPU (where measured), and each cgroup's CPU share, the
    median over the repetitions; the other tenants' share their mean."""
    import numpy as np

    first = runs[0]
    services: dict[str, ServiceResult] = {}
    for name in first.services:
        got = [r.services[name] for r in runs if name in r.services]
        # the percentiles the generator reported (never one interpolated between two it
        # did); per-request records give P50, P90, P99
        reported = [set(s.reported or {}) for s in got if isinstance(s, ReportedService)]
        keys = set(FITTED_PERCENTILES).intersection(*reported) if reported else {50.0, 90.0, 99.0}
        pct = {p: float(np.median([s.percentile(p) for s in got])) for p in sorted(keys)}
        # the generator's CPU is part of what the calibration fits (client_cpu): dropping it
        # here left every suite's load generators free
        gen = [g for s in got if isinstance(s, MeasuredService) and math.isfinite(g := s.generator_cpu)]
        switches = [g for s in got if isinstance(s, MeasuredService) and math.isfinite(g := s.generator_switches)]
        server = [g for s in got if isinstance(s, MeasuredService) and math.isfinite(g := s.server_switches)]
        services[name] = ReportedService(
            name=name,
            latencies_s=np.empty(0),
            completions_s=np.empty(0),
            started=0,
            completed=0,
            measured_s=first.measured_s,
            reported=pct,
            reported_qps=float(np.median([s.qps for s in got])),
            generator_cpu=float(np.median(gen)) if gen else math.nan,
            generator_switches=float(np.median(switches)) if switches else math.nan,
            server_switches=float(np.median(server)) if server else math.nan,
        )
    # each cgroup's CPU (the service's is its measured CPU per request): the median share
    cgroups = {}
    for c, cg in first.cgroups.items():
        share = float(np.median([r.cgroups[c].cpu_share for r in runs if c in r.cgroups]))
        # its queue on each CPU (traced runs): the times at each count, summed over them
        tables = [r.cgroups[c].runnable_us for r in runs if c in r.cgroups and r.cgroups[c].runnable_us]
        runnable = [[sum(col) for col in zip(*rows, strict=True)] for rows in zip(*tables, strict=True)] if tables else None
        cgroups[c] = replace(cg, cpu_share=share, cpu_s=share * first.ncpus * first.measured_s, runnable_us=runnable)
    # the other tenants meanwhile: their mean over the repetitions (replay.background)
    others = [r.others_cpu_share for r in runs if r.others_cpu_share is not None]
    bursts = [r.others_burst_s for r in runs if r.others_burst_s is not None]
    return replace(
        first,
        services=services,
        cgroups=cgroups,
        others_cpu_share=mean_background(others) if others else None,
        others_burst_s=float(np.median(bursts)) if bursts else None,
    )


def _queue_line(svc: dict[str, Any]) -> str | None:
    """Each service's queue on a CPU alone: the trace's (the alone runs pooled) beside the
    model's (its alone case, the median over seeds): how often it ran dry, and how full it was."""
    out = []
    for name, a in ((svc.get("alone_measured") or {}).get("services") or {}).items():
        host = a.get("queue") or {}
        seeds = (svc.get("calibration") or {}).values()
        model = {k: [f[key] for f in seeds if (key := f"{name} alone {k}") in f] for k in (QUEUE_EMPTY, QUEUE_MEAN, QUEUE_SD)}
        if not host or not all(model.values()):
            continue
        med = {k: float(statistics.median(v)) for k, v in model.items()}
        out.append(
            f"{name}'s queue on a CPU alone, host (traced) / model: empty {host[QUEUE_EMPTY]:.2%} / {med[QUEUE_EMPTY]:.2%} of CPU-time; "
            f"runnable mean {host[QUEUE_MEAN]:.2f} / {med[QUEUE_MEAN]:.2f}, sd {host[QUEUE_SD]:.2f} / {med[QUEUE_SD]:.2f}"
        )
    return "; ".join(out) or None


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


class Suite:
    def __init__(
        self,
        services: list[Service],
        reps: int,
        seeds: int,
        seed: int,
        out: Path,
        command: str,
        say=_say,
        overrides: list[str] | None = None,
    ) -> None:
        self.services = services
        self.overrides = list(overrides or [])  # --set and --duration, as scenario overrides
        self.reps = reps
        self.seeds = seeds
        self.seed = seed
        self.out = out
        self.command = command
        self.say = say
        self.substituted: set[Knob] = set()
        self.loads: list[dict[str, Any]] = []  # the machine's load average at each host run
        self.complete = False
        self.interrupted = False
        self.host_info: dict[str, Any] | None = None  # a rescored suite keeps its host's
        self.cpuidle: dict[str, Any] | None = None  # the idle exit measured before the runs
        self.steal: dict[str, Any] | None = None  # the hypervisor's stalls, likewise

    # -- the host ------------------------------------------------------------------------

    def run_host(self) -> None:
        for svc in self.services:
            precheck([svc.variants[c] for c in svc.cases])
        scenarios = [v.scenario for svc in self.services for v in svc.variants.values()]
        self.say(host_kernel().summary())
        with Session(log=self.say) as session:
            self.substituted = check_knobs(scenarios, missing_knobs(session), self.say)
            total, done = self.reps * sum(len(s.cases) for s in self.services), 0
            for rep in range(self.reps):
                for svc in self.services:
                    for case in svc.cases:
                        done += 1
                        v = svc.variants[case]
                        before = loadavg()
                        self.say(f"fidelity [{done}/{total}] {svc.name}: {case}, repetition {rep + 1} (load average {before}) ...")
                        hv = Variant(v.name, v.baseline, host_equivalent(v.scenario, self.substituted))
                        try:
                            # the alone runs traced: the server's switches set the rounds
                            result = run_on_host(hv, self.seed + rep, session, self.substituted, trace=case == svc.baseline).result
                        except (ColosimError, OSError, ValueError, KeyError) as err:
                            # one case's failure (a server that would not start, a report
                            # that did not parse) costs that run only: the host was cleaned
                            # up by run_on_host, and the suite goes on
                            svc.failures.append({"case": case, "rep": rep, "error": str(err)})
                            self.say(f"fidelity: {svc.name}: {case}, repetition {rep + 1} failed: {err}")
                        else:
                            svc.host.setdefault(case, []).append(_pick(metrics(result, v.scenario)))
                            svc.background.setdefault(case, []).append(background_cpus(result.others_cpu_share, result.ncpus))
                            svc.replay_cpus.setdefault(case, []).append(background_cpus(result.replay_cpu_share, result.ncpus))
                            if case == svc.baseline:
                                svc.alone.append(result)
                        self.loads.append({"service": svc.name, "case": case, "rep": rep, "before": before, "after": loadavg()})
                        self.write_json()

    # -- the prediction --------------------------------------------------------------------

    def predict(self) -> None:
        """Each service calibrated on its alone runs (pooled), every case predicted per seed."""
        for svc in self.services:
            if svc.alone:
                pooled = pooled_alone(svc.alone)
                alone = alone_runs(svc.scenario, pooled)
                svc.alone_measured = {"ncpus": pooled.ncpus, "services": {n: a.to_dict() for n, a in alone.items()}}
            elif svc.alone_measured:  # --repredict: the measurements a finished suite kept
                alone = {n: AloneRun.from_dict(d) for n, d in svc.alone_measured["services"].items()}
            else:
                svc.note = "no alone run finished on the host: nothing to calibrate on, no prediction"
                continue
            ncpus = int(svc.alone_measured["ncpus"])
            svc.sim, svc.calibration = {}, {}
            for k in range(self.seeds):
                seed = self.seed + k
                self.say(f"fidelity: {svc.name}: predicting every case, seed {seed} ...")
                # every case beside its own host runs' mean background (the alone case's is the
                # pooled alone run's, which the calibration ran beside too)
                background = {c: mean_background(svc.background.get(c, [])) for c in svc.cases}
                fits = fit_alone_runs(svc.scenario, alone, ncpus, seed, self.substituted)
                predicted, factors = predict(
                    svc.scenario, None, seed, self.substituted, fits=fits, background=background, background_burst_s=others_burst(alone)
                )
                # the model's queue of each service's cgroup alone, beside the trace's (alone_measured)
                base = predicted.runs[svc.baseline]
                for name, w in svc.variants[svc.baseline].scenario.workloads.items():
                    cg = base.cgroups.get(w.cgroup)
                    if name in alone and cg is not None:
                        factors.update({f"{name} alone {k}": v for k, v in queue_figures(cg.runnable_us).items()})
                svc.calibration[str(seed)] = factors
                for case in svc.cases:
                    svc.sim.setdefault(case, []).append(_pick(metrics(predicted.runs[case], svc.variants[case].scenario)))

    def score(self) -> None:
        for svc in self.services:
            svc.scores = {}
            for case in svc.cases:
                host, sim = svc.host.get(case, []), svc.sim.get(case, [])
                row = {}
                for m in METRICS:
                    s = score([h[m] for h in host], [p[m] for p in sim])
                    if s.host.n or s.sim.n:
                        row[m] = s
                svc.scores[case] = row
            svc.regimes = {}
            for case in svc.cases:
                claim = batch_claim(svc.variants[case].scenario, self.ncpus())
                shares = [[run[BATCH] for run in side.get(case, [])] for side in (svc.host, svc.sim)]
                r = regimes(claim, *shares)
                if r is not None and (r.host or r.sim):
                    svc.regimes[case] = r

    def ncpus(self) -> int:
        """The CPUs the suite's host had (a rescored suite's: as it kept them)."""
        return int((self.host_info or {}).get("cpus") or len(host_cpus()))

    def regime_doc(self, svc: Service, case: str) -> dict[str, Any]:
        """A case's regimes, and — where the host's repetitions mostly settled in one regime and
        some seeds settled there too — each metric's error counting only the runs of both sides
        in that regime ("in the host's regime"): how far the model is when it lands where the
        host did, apart from how often it does."""
        r = svc.regimes[case]
        doc = r.to_dict()
        where = majority(r.host)
        doc["in_host_regime"] = {}
        if where is None:
            return doc
        for m in ERROR_METRICS:
            host = in_regime([h[m] for h in svc.host.get(case, [])], r.host, where)
            sim = in_regime([p[m] for p in svc.sim.get(case, [])], r.sim, where)
            if host and sim:
                h, p = statistics.fmean(host), statistics.fmean(sim)
                doc["in_host_regime"][m] = {"host": h, "sim": p, "host_runs": len(host), "sim_runs": len(sim), "error": error(h, p)}
        return doc

    def rankings(self, svc: Service) -> list[dict[str, Any]]:
        out = []
        for m in RANKED:
            r = ranking(m, {c: row[m] for c, row in svc.scores.items() if m in row})
            if r is not None:
                out.append(r.to_dict())
        return out

    def overall(self) -> dict[str, Any]:
        """Over the colocated cases of every service (the alone case is the calibration's target)."""
        colocated = [(svc, c, row) for svc in self.services for c, row in svc.scores.items() if c != svc.baseline]
        scored = [s for _, _, row in colocated for s in row.values() if s.host.n and s.sim.n]
        out: dict[str, Any] = {
            f"median |error| {m}": median_abs_error([row[m] for _, _, row in colocated if m in row]) for m in ERROR_METRICS
        }
        out["scored"] = len(scored)
        out[f"within {WITHIN:.0%}"] = sum(s.within for s in scored)
        out["inside the host's interval"] = sum(s.inside for s in scored)
        out["per metric"] = {}
        for m in METRICS:
            got = [row[m] for _, _, row in colocated if m in row and row[m].host.n and row[m].sim.n]
            out["per metric"][m] = {"scored": len(got), "within": sum(s.within for s in got), "inside": sum(s.inside for s in got)}
        # the fidelity issue's goal, case by case ("service: case" -> met)
        verdicts = {f"{svc.name}: {c}": meets_goal(row) for svc, c, row in colocated}
        out["goal"] = {
            "rule": {m: {"within": bound, "or inside the host's interval": inside} for m, (bound, inside) in GOAL.items()},
            "cases": {k: v for k, v in verdicts.items() if v is not None},
        }
        ranks = {svc.name: self.rankings(svc) for svc in self.services}
        out["rankings"] = ranks
        out["same order"] = {f"{name} by {r['metric']}": r["same_order"] for name, rs in ranks.items() for r in rs}
        # the pairs the host tells apart, over every ranking
        rs = [r for rs in ranks.values() for r in rs]
        out["separated pairs"] = {"separated": sum(r["separated"] for r in rs), "agreed": sum(r["agreed"] for r in rs)}
        out["agrees where separated"] = {f"{name} by {r['metric']}": r["agrees_where_separated"] for name, rs in ranks.items() for r in rs}
        out["regimes"] = self.regimes_overall()
        return out

    def regimes_overall(self) -> dict[str, Any]:
        """Over the colocated cases whose batch has a regime to tell: in how many the model's
        seeds mostly settle where the host's repetitions mostly did, where either side split,
        and the median |error| counting only the runs in the host's regime."""
        cases = [(f"{svc.name}: {c}", svc, c) for svc in self.services for c in svc.regimes if c != svc.baseline]
        docs = {k: self.regime_doc(svc, c) for k, svc, c in cases}
        told = {k: d["agree"] for k, d in docs.items() if d["agree"] is not None}
        errors = {m: [abs(d["in_host_regime"][m]["error"]) for d in docs.values() if m in d["in_host_regime"]] for m in ERROR_METRICS}
        # the same cases' errors over all their runs, to set beside those
        every = {
            m: [abs(svc.scores[c][m].error) for k, svc, c in cases if m in docs[k]["in_host_regime"] and m in svc.scores.get(c, {})]
            for m in ERROR_METRICS
        }
        return {
            "cases": len(docs),
            "told": len(told),
            "agree": sum(told.values()),
            "disagree": [k for k, v in told.items() if not v],
            "model split": [k for k, d in docs.items() if d["sim_split"]],
            "host split": [k for k, d in docs.items() if d["host_split"]],
            "median |error| in the host's regime": {
                m: {
                    "median": statistics.median(e) if e else math.nan,
                    "cases": len(e),
                    "all runs": statistics.median(every[m]) if every[m] else math.nan,
                }
                for m, e in errors.items()
            },
        }

    # -- outputs ----------------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        host = self.host_info or {
            "cpus": len(host_cpus()),
            "kernel": os.uname().release,
            "scheduler": host_kernel().as_dict(),
            "cpuidle": self.cpuidle,
            "steal": self.steal,
        }
        return {
            "command": self.command,
            "complete": self.complete,
            "interrupted": self.interrupted,
            "host": {**host, "load_average": self.loads},
            "config": {"reps": self.reps, "seeds": self.seeds, "seed": self.seed, "overrides": self.overrides},
            # knobs this host lacked, run as their nearest equivalent (replay.host_run)
            "substituted": sorted(k.name for k in self.substituted),
            "services": {
                svc.name: {
                    "scenario": str(svc.path),
                    "cases": svc.cases,
                    "baseline": svc.baseline,
                    "host": svc.host,
                    "failures": svc.failures,
                    "calibration": svc.calibration,
                    "background_cpus": svc.background,
                    "replay_cpus": svc.replay_cpus,
                    "sim": svc.sim,
                    "alone_measured": svc.alone_measured,
                    "scores": {c: {m: s.to_dict() for m, s in row.items()} for c, row in svc.scores.items()},
                    "rankings": self.rankings(svc) if svc.scores else [],
                    "regimes": {c: self.regime_doc(svc, c) for c in svc.regimes},
                    "note": svc.note,
                }
                for svc in self.services
            },
            "overall": self.overall() if any(svc.scores for svc in self.services) else {},
        }

    def write_json(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / "fidelity.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(finite(self.document()), indent=2) + "\n")
        tmp.rename(path)
        return path

    def finish(self, predict: bool = True) -> str:
        """Predict (unless rescoring), score, write the JSON and the report; the terminal text."""
        if predict:
            self.predict()
        self.score()
        self.write_json()
        from replay.fidelity_report import write_report

        doc = json.loads((self.out / "fidelity.json").read_text())
        write_report(doc, self.out / "fidelity.html")
        return text(doc)


def _regime_lines(svc: dict[str, Any]) -> list[str]:
    """Per case whose batch has a regime to tell: how many host repetitions and seeds starved
    it, their batch shares, and the errors in the host's regime."""
    out = []
    for case, r in (svc.get("regimes") or {}).items():
        host = [h.get(BATCH) for h in svc["host"].get(case, [])]
        sim = [p.get(BATCH) for p in svc["sim"].get(case, [])]

        def side(runs: list[str | None], shares: list[float | None]) -> str:
            told = [x for x in runs if x is not None]
            values = " ".join(f"{x:.3f}" for x in shares if x is not None and math.isfinite(x))
            return f"starved {sum(x == 'starved' for x in told)} of {len(told)} ({values})"

        claim = Claim(r["claim"], r.get("floor", 0.0))
        line = f"batch regime, {case} (starved: {claim.text()}): host {side(r['host'], host)}; model {side(r['sim'], sim)}"
        where = r.get("host_majority")
        errs = r.get("in_host_regime") or {}
        if where is not None and (r["sim_split"] or r["host_split"] or r.get("agree") is False):
            if errs:
                first = next(iter(errs.values()))
                line += (
                    f"; in the host's regime ({where}: {_count(first['host_runs'], 'repetition')}, {_count(first['sim_runs'], 'seed')}) "
                    + ", ".join(f"{m} {_pct(e['error'])}" for m, e in errs.items())
                )
            else:
                line += f"; no seed settled in the host's regime ({where})"
        out.append(line)
    return out


def _regimes_overall_lines(r: dict[str, Any] | None) -> list[str]:
    if not r or not r["cases"]:
        return []
    lines = [
        f"  batch regimes ({r['cases']} cases whose batch has at least a tenth of the node between what a quota leaves it and "
        f"what its weight claims; starved: under a quarter of the way): the model's seeds mostly settle where the host's repetitions mostly did in {r['agree']} of {r['told']}"
        + (f" (not: {', '.join(r['disagree'])})" if r["disagree"] else ""),
        f"    seeds split between regimes: {', '.join(r['model split']) or 'none'}; "
        f"host repetitions split: {', '.join(r['host split']) or 'none'}",
    ]
    errs = r["median |error| in the host's regime"]
    told = {m: e for m, e in errs.items() if e["cases"]}
    if told:
        lines.append(
            "    median |error| counting only the runs in the host's regime: "
            + ", ".join(f"{m} {e['median'] * 100:.1f}% ({e['cases']} cases)" for m, e in told.items())
            + "; the same cases over all their runs: "
            + ", ".join(f"{m} {e['all runs'] * 100:.1f}%" for m, e in told.items())
        )
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _interval(i: dict[str, Any]) -> str:
    if not i["n"]:
        return "-"
    if i["n"] == 1:
        return sig3(i["mean"])
    return f"{sig3(i['mean'])} [{sig3(i['lo'])}, {sig3(i['hi'])}]"


def _spread(values: list[float]) -> str:
    vs = [v for v in values if v is not None and math.isfinite(v)]
    if not vs:
        return "-"
    mean = sum(vs) / len(vs)
    return f"{mean:.2f}" if len(vs) == 1 else f"{mean:.2f} [{min(vs):.2f}-{max(vs):.2f}]"


def _background_run(svc: dict[str, Any]) -> dict[str, float]:
    """Per case, the background CPUs the model ran, mean over the seeds (predict's factors);
    the cases given none are left out."""
    out: dict[str, float] = {}
    for case in svc.get("cases") or []:
        got = [f.get(f"{case} background CPUs run") for f in (svc.get("calibration") or {}).values()]
        got = [v for v in got if v is not None and math.isfinite(v)]
        if got:
            out[case] = sum(got) / len(got)
    return out


def _calibration_line(name: str, f: dict[str, float | None]) -> str:
    """The service's measured CPU per thread and the fit's rounds, from predict's factors."""
    cpu = f.get(f"{name} service_cpu_s")
    out = []
    if cpu is not None and math.isfinite(cpu):
        out.append(f"service CPU {cpu * 1e3:.3g} ms per request per thread (measured from its cgroup)")
    rounds = f.get(f"{name} rounds")
    if rounds is not None and math.isfinite(rounds) and rounds > 1:
        traced = f.get(f"{name} rounds from server") == 1.0
        out.append(f"{rounds:.0f} rounds ({'the server traced' if traced else 'the generator'})")
    return ", ".join(out)


def _separated_text(r: dict[str, Any]) -> str:
    if "separated" not in r:  # older files
        return ""
    if not r["separated"]:
        return "the host tells no pair apart"
    wrong = f" (not: {', '.join(r['disagreed'])})" if r["disagreed"] else ""
    return f"pairs the host tells apart ordered as the host: {r['agreed']} of {r['separated']}{wrong}"


def _pct(e: float | None) -> str:
    return f"{e * 100:+.1f}%" if e is not None and math.isfinite(e) else "-"


def text(doc: dict[str, Any]) -> str:
    """The terminal's tables, from the JSON document."""
    parts = []
    host = doc["host"]
    parts.append(
        f"colosim fidelity: {host['cpus']} CPUs, Linux {host['kernel']}, {doc['config']['reps']} host repetitions, "
        f"{doc['config']['seeds']} simulator seeds; mean [95% bootstrap interval]; error = sim / host - 1"
    )
    for name, svc in doc["services"].items():
        rows = []
        for case, row in svc["scores"].items():
            for m, s in row.items():
                tag = " (calibrated)" if case == svc["baseline"] else ""
                rows.append(
                    [
                        f"{case}{tag}",
                        m,
                        _interval(s["host"]),
                        _interval(s["sim"]),
                        _pct(s["error"]),
                        "yes" if s["inside"] else "no",
                        "yes" if s["within"] else "no",
                    ]
                )
        parts.append(f"\n{name} ({svc['scenario']})")
        if svc["note"]:
            parts.append(svc["note"])
        bg = svc.get("background_cpus") or {}
        if bg:
            parts.append(
                "background CPUs (the other tenants' mean busy CPUs on the host, run beside each prediction): "
                + "; ".join(f"{c} {_spread(v)}" for c, v in bg.items() if v)
            )
        ran = _background_run(svc)
        if ran:
            parts.append(
                "the background the model ran of that (mean over seeds; one it starves is runnable and never runs): "
                + "; ".join(f"{c} {v:.3f}" for c, v in ran.items())
            )
        bursts = sorted({a.get("others_burst") for a in (svc.get("alone_measured") or {}).get("services", {}).values()} - {None})
        if bursts:
            parts.append(
                "the other tenants' bursts (CPU from a wakeup to a sleep, CPU-weighted mean, traced in the alone runs; "
                "the prediction's background runs in bursts of this length): " + ", ".join(f"{b * 1e3:.3g} ms" for b in bursts)
            )
        line = _queue_line(svc)
        if line:
            parts.append(line)
        own = svc.get("replay_cpus") or {}
        if any(own.values()):
            parts.append(
                "of which replay's own process (its sampling, the alone runs' trace): "
                + "; ".join(f"{c} {_spread(v)}" for c, v in own.items() if v)
            )
        for seed, f in (svc.get("calibration") or {}).items():
            line = _calibration_line(name, f)
            if line:
                parts.append(f"calibration (seed {seed}): {line}")
            break  # the seeds' calibrations differ only by the simulator's seed
        if rows:
            parts.append(markdown(["case", "metric", "host", "sim", "error", "inside", f"within {WITHIN:.0%}"], rows))
        for f in svc["failures"]:
            parts.append(f"failed: {f['case']}, repetition {f['rep'] + 1}: {f['error']}")
        for r in svc["rankings"]:
            parts.append(
                f"ranked by {r['metric']}: host {r['host_order']}; sim {r['sim_order']}; "
                f"Kendall tau {sig3(r['tau']) if r['tau'] is not None else '-'}, same order: {'yes' if r['same_order'] else 'no'}; "
                + _separated_text(r)
            )
        parts.extend(_regime_lines(svc))
    o = doc.get("overall") or {}
    if o:
        parts.append("\noverall (the colocated cases; the alone case is the calibration's target):")
        for m in ERROR_METRICS:
            v = o.get(f"median |error| {m}")
            parts.append(
                f"  median |error| of {m}: {v * 100:.1f}%" if v is not None and math.isfinite(v) else f"  median |error| of {m}: -"
            )
        parts.append(f"  within {WITHIN:.0%} of the host: {o[f'within {WITHIN:.0%}']} of {o['scored']} (case, metric)")
        inside = o["inside the host's interval"]
        parts.append(f"  inside the host's interval: {inside} of {o['scored']}")
        for m, c in o["per metric"].items():
            parts.append(f"    {m}: within {WITHIN:.0%} {c['within']} of {c['scored']} cases, inside {c['inside']} of {c['scored']}")
        goal = o.get("goal")  # older files: none
        if goal:
            met = [k for k, v in goal["cases"].items() if v]
            parts.append(f"  cases meeting the goal ({goal_text()}): {len(met)} of {len(goal['cases'])} ({', '.join(met) or 'none'})")
        same = o["same order"]
        parts.append(
            f"  cases ranked in the host's order: {sum(same.values())} of {len(same)} ({', '.join(k for k, v in same.items() if v) or 'none'})"
        )
        parts.extend(_regimes_overall_lines(o.get("regimes")))
        pairs = o.get("separated pairs")  # older files: none
        if pairs:
            where = o["agrees where separated"]
            told = {k: v for k, v in where.items() if v is not None}
            parts.append(
                f"  pairs of cases the host tells apart (intervals disjoint), ordered as the host by the simulator: "
                f"{pairs['agreed']} of {pairs['separated']}; rankings right on every such pair: "
                f"{sum(told.values())} of {len(told)} ({', '.join(k for k, v in told.items() if v) or 'none'})"
            )
    return "\n".join(parts)


def fidelity(
    services: list[str],
    cases: list[str] | None,
    reps: int,
    duration: float | None,
    seeds: int,
    seed: int,
    out: Path,
    overrides: list[str],
    command: str,
    say: Callable[[str], Any] = _say,
) -> int:
    if reps < 1:
        raise ScenarioError(f"--reps: must be at least 1 (got {reps})")
    if seeds < 1:
        raise ScenarioError(f"--seeds: must be at least 1 (got {seeds})")
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise ScenarioError(f"--duration: must be a positive number of seconds (got {duration})")
    sets = list(overrides) + ([f"scenario.duration={duration}s"] if duration is not None else [])
    # a bad name or case is refused before anything runs
    loaded = [load_service(s, cases, sets) for s in services]
    exit_latency = None
    if not any(o.replace(" ", "").startswith("node.cpuidle") for o in sets):
        # the host's idle exit, measured once before the runs while the host is quiet, and
        # kept with the host (replay/cpuidle.py). The predictions do not take it unless asked
        # (--set, or --repredict with its "override"): judged on this host's suites it made
        # them no better (docs/replay.md, "Idle exits")
        exit_latency = measure_exit_latency()
        say(exit_latency.summary())
    stalls = None
    if not any(o.replace(" ", "").startswith("node.steal") for o in sets):
        # the hypervisor's stalls of a busy CPU (replay/steal.py), measured and kept the same way
        stalls = measure_stalls()
        say(stalls.summary())
    suite = Suite(loaded, reps, seeds, seed, out, command, say, overrides=sets)
    suite.cpuidle = None if exit_latency is None else {**exit_latency.to_dict(), "override": exit_latency.override()}
    suite.steal = None if stalls is None else {**stalls.to_dict(), "override": stalls.override()}
    started = time.monotonic()
    try:
        suite.run_host()
    except KeyboardInterrupt:
        # the session has cleaned the host up; what finished is still scored and reported
        suite.interrupted = True
        say("fidelity: interrupted; scoring the runs that finished")
        print(suite.finish())
        print(f"\nwrote {out / 'fidelity.json'} and {out / 'fidelity.html'} (interrupted: partial)")
        raise
    suite.complete = True
    report = suite.finish()
    print(report)
    print(f"\nwrote {out / 'fidelity.json'} and {out / 'fidelity.html'} ({time.monotonic() - started:.0f} s)")
    failed = sum(len(s.failures) for s in suite.services)
    if failed:
        say(f"fidelity: {failed} host run{'s' if failed != 1 else ''} failed (recorded in fidelity.json)")
        return 1
    return 0


def _measured(cases: dict[str, list[dict[str, float | None]]]) -> dict[str, list[dict[str, float]]]:
    """Per-case measurements as the JSON holds them (NaN written as null), as numbers."""
    return {c: [{m: math.nan if v is None else float(v) for m, v in run.items()} for run in runs] for c, runs in cases.items()}


def rescore(
    source: Path,
    out: Path,
    say: Callable[[str], Any] = _say,
    repredict: bool = False,
    overrides: list[str] | None = None,
    seeds: int | None = None,
) -> int:
    """`colosim fidelity --rescore FILE`: score a finished suite's measurements and predictions
    again (after a change to the scoring, or to see a partial suite), nothing run; the JSON
    and the report are written to `out`. `--repredict FILE`: calibrate and predict again with
    this code from the host measurements the suite kept (its pooled alone runs, each case's
    background), then score — a model change judged against the same host runs; `overrides`
    (--set) are added to the suite's own, last; `seeds` (--seeds) replaces the suite's count of
    simulator seeds."""
    where = f"--{'repredict' if repredict else 'rescore'} {source}"
    if seeds is not None and seeds < 1:
        raise ScenarioError(f"--seeds: must be at least 1 (got {seeds})")
    if overrides and not repredict:
        raise ScenarioError(f"{where}: --set changes a prediction, and --rescore predicts nothing (use --repredict)")
    try:
        doc = json.loads(source.read_text())
        services = []
        for name, d in doc["services"].items():
            # the suite's own --set / --duration: the prediction simulates what the host ran
            svc = load_service(d["scenario"], d["cases"], [*doc["config"].get("overrides", []), *(overrides or [])])
            svc.name = name
            svc.host, svc.sim = _measured(d["host"]), _measured(d["sim"])
            svc.failures, svc.note = d["failures"], d["note"]
            svc.calibration = d["calibration"]
            svc.background = d.get("background_cpus", {})  # older files measured none
            svc.replay_cpus = d.get("replay_cpus", {})
            svc.alone_measured = d.get("alone_measured", {})  # older files kept none
            if repredict and svc.host.get(svc.baseline) and not svc.alone_measured:
                raise ScenarioError(
                    f"{where}: services.{name} kept no alone_measured (written before --repredict existed): run the suite again"
                )
            services.append(svc)
        config = doc["config"]
        suite = Suite(
            services,
            config["reps"],
            seeds if seeds is not None else config["seeds"],
            config["seed"],
            out,
            doc["command"],
            say,
            overrides=[*config.get("overrides", []), *(overrides or [])],
        )
        suite.host_info = {k: v for k, v in doc["host"].items() if k != "load_average"}
        suite.loads = doc["host"]["load_average"]
        suite.complete, suite.interrupted = doc["complete"], doc["interrupted"]
        suite.substituted = {Knob[k] for k in doc.get("substituted", [])}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ScenarioError(f"{where}: not a fidelity.json colosim fidelity wrote ({type(err).__name__}: {err})") from None
    if repredict:
        cpus = doc["host"].get("cpus")
        if cpus is not None and cpus != len(host_cpus()):
            raise ScenarioError(
                f"{where}: the suite ran on {cpus} CPUs and this host has {len(host_cpus())}: its scenarios take this host's topology"
            )
    print(suite.finish(predict=repredict))
    print(f"\nwrote {out / 'fidelity.json'} and {out / 'fidelity.html'} ({'repredicted' if repredict else 'rescored'} {source})")
    return 0


def command_line(argv: list[str]) -> str:
    return "colosim " + " ".join(shlex.quote(a) for a in argv)
