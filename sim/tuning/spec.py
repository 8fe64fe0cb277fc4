"""What a study is: the scenario's `[tune]` table and the command line, checked before any
trial runs.  Every mistake (an unknown parameter, a bad SLO, a metric of a workload the
scenario lacks) is a ScenarioError naming where it is."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.errors import ScenarioError
from sim.scenario import Scenario, read_document
from sim.tuning.evaluate import default_batch, services_of
from sim.tuning.fidelity import DEFAULT_WINDOW_S, trace_speed
from sim.tuning.goals import LATENCIES, NODE_METRICS, Metric, Sense, Slo, parse_metric, parse_slo
from sim.tuning.space import Dimension, parse_range, policy_class, search_space

SAMPLERS = ("tpe", "nsga2", "random")


class TuneTable(BaseModel):
    """[tune] in a scenario file; every field can be given on the command line instead."""

    model_config = ConfigDict(extra="forbid", strict=True)
    policy: str | None = None
    # names (whole declared range) or name -> [low, high]
    params: list[str] | dict[str, list[float]] | None = None
    slo: list[str] = []
    objective: list[str] = ["batch_cpu"]
    trials: int = Field(100, ge=1)
    seeds: int = Field(1, ge=1, le=1000)
    batch: list[str] | None = None
    sampler: Literal["tpe", "nsga2", "random"] = "tpe"
    # "window": a trial runs each trace's busiest `window` first; the pruner picks which
    # run whole (sim/tuning/fidelity.py)
    fidelity: Literal["full", "window"] = "full"
    window: str | None = None  # trace time, e.g. "1h", "30m", "3600s" (default 1h)


@dataclass
class TuneSpec:
    path: Path
    document: dict[str, Any]
    scenario: Scenario
    policy: str
    fixed: dict[str, Any]  # the policy configuration that is not searched
    dims: list[Dimension]
    objectives: list[Metric]
    slos: list[Slo]
    seeds: list[int]
    cases: list[str]
    batch: list[str]
    services: list[str]
    trials: int
    sampler: str
    overrides: dict[str, Any] = field(default_factory=dict)
    traces: list[str] = field(default_factory=list)  # a trace set: every case with each
    fidelity: str = "full"
    window_s: float = 3600.0  # trace time of a window (fidelity "window")

    @property
    def metrics(self) -> list[Metric]:
        """Everything summarized per trial: the node metrics and each service's."""
        out = [Metric(t) for t in NODE_METRICS]
        for s in self.services:
            out += [Metric(f"{s}.{stat}", s, stat) for stat in (*LATENCIES, "qps")]
        return out

    @property
    def directions(self) -> list[Literal["maximize", "minimize"]]:
        return ["maximize" if o.sense is Sense.MAXIMIZE else "minimize" for o in self.objectives]

    @property
    def multi(self) -> bool:
        return len(self.objectives) > 1

    def defaults(self) -> dict[str, float]:
        return {d.name: (int(d.default) if d.param.integer else d.default) for d in self.dims}

    def identity(self) -> dict[str, Any]:
        """What makes two runs of `colosim tune` the same study (checked on resume)."""
        return {
            "scenario": self.scenario.name,
            "policy": self.policy,
            "fixed": self.fixed,
            "params": [d.to_dict() for d in self.dims],
            "objectives": [o.text for o in self.objectives],
            "slo": [s.text for s in self.slos],
            "seeds": self.seeds,
            "cases": self.cases,
            "batch": self.batch,
            "overrides": {k: repr(v) for k, v in self.overrides.items()},
            "traces": self.traces,
            # only when windowed, so a study made before fidelity existed still resumes
            **({"fidelity": self.fidelity, "window_s": self.window_s} if self.fidelity != "full" else {}),
        }


def build_spec(
    path: Path,
    overrides: dict[str, Any],
    policy: str | None = None,
    params: list[str] | None = None,
    slo: list[str] | None = None,
    objective: list[str] | None = None,
    trials: int | None = None,
    seeds: int | None = None,
    sampler: str | None = None,
    traces: list[str] | None = None,
    fidelity: str | None = None,
    window: str | None = None,
) -> TuneSpec:
    from sim.scenario import trace_overrides

    document = read_document(path)
    traces = [str(t) for t in traces or []]
    first = trace_overrides(document, traces[0]) if traces else {}
    scenario = Scenario.from_document(document, {**overrides, **first})
    for t in traces[1:]:
        Scenario.from_document(document, {**overrides, **trace_overrides(document, t)})  # each trace fits
    try:
        table = TuneTable.model_validate(scenario.tune or {})
    except ValidationError as err:
        e = err.errors()[0]
        where = ".".join(str(p) for p in ("tune", *e["loc"]))
        raise ScenarioError(f"{where}: {e['msg']}") from None

    name = policy or table.policy or (scenario.policy or {}).get("name")
    if not name:
        raise ScenarioError("tune: which policy? give --policy NAME (or [tune] policy, or a [policy] table)")
    cls = policy_class(name, "--policy" if policy else "tune.policy")
    fixed = {"name": name}
    if scenario.policy and scenario.policy.get("name") == name:
        fixed = dict(scenario.policy)

    if params:
        where = "--param"
        chosen = dict(parse_range(p, where) for p in params)
    elif table.params is not None:
        where = "tune.params"
        if isinstance(table.params, list):
            chosen = {n: None for n in table.params}
        else:
            chosen = {}
            for n, rng in table.params.items():
                if len(rng) != 2:
                    raise ScenarioError(f"tune.params.{n}: a range is [low, high] (got {rng})")
                chosen[n] = (float(rng[0]), float(rng[1]))
    else:
        where, chosen = "tune.params", None
    dims = search_space(cls, chosen, where)
    for d in dims:
        fixed.pop(d.name, None)

    services = services_of(scenario)
    obj_texts = objective or table.objective
    where = "--objective" if objective else "tune.objective"
    objectives = [parse_metric(t, services, where) for t in obj_texts]
    if not objectives:
        raise ScenarioError(f"{where}: give at least one objective")
    if len({o.text for o in objectives}) < len(objectives):
        raise ScenarioError(f"{where}: an objective is named twice")
    if len(objectives) > 1 and len({o.sense for o in objectives}) == 1:
        raise ScenarioError(
            f"{where}: several objectives that all go the same way ({objectives[0].sense.value}) have no trade-off; give one, or pair a throughput with a latency"
        )
    slo_texts = slo if slo is not None and slo != [] else table.slo
    where = "--slo" if slo else "tune.slo"
    slos = [parse_slo(t, services, f"{where}[{i}]") for i, t in enumerate(slo_texts)]

    batch = table.batch if table.batch is not None else default_batch(scenario)
    for b in batch:
        if b not in scenario.workloads:
            raise ScenarioError(f"tune.batch: no workload named {b!r} (declared: {', '.join(scenario.workloads)})")
        if b in services:
            raise ScenarioError(f"tune.batch: {b!r} serves requests; batch workloads are the others")
    if any(o.text == "batch_cpu" for o in objectives) and not batch:
        raise ScenarioError(
            "tune: the objective batch_cpu needs batch workloads (hog, memory_hog, cache_writer, analytics, duty), and the scenario has none (or name them: [tune] batch)"
        )

    n_seeds = seeds if seeds is not None else table.seeds
    if not 1 <= n_seeds <= 1000:
        raise ScenarioError(f"--seeds: must be in 1..1000 (got {n_seeds})")
    n_trials = trials if trials is not None else table.trials
    if n_trials < 1:
        raise ScenarioError(f"--trials: must be >= 1 (got {n_trials})")
    chosen_sampler = sampler or table.sampler
    chosen_fidelity = fidelity or table.fidelity
    window_text = window or table.window
    where = "--window" if window else "tune.window"
    window_s = window_seconds(window_text, where) if window_text is not None else DEFAULT_WINDOW_S
    if chosen_fidelity == "window":
        where = "--fidelity" if fidelity else "tune.fidelity"
        if len(objectives) > 1:
            raise ScenarioError(f"{where}: window prunes trials, which Optuna does for one objective only (got {len(objectives)})")
        if not traces:
            raise ScenarioError(
                f"{where}: window runs each trace's busiest window first; give a trace set (--trace FILE or --trace-set DIR)"
            )
    elif window is not None:
        raise ScenarioError('--window: only with fidelity "window" (--fidelity window or [tune] fidelity)')
    spec = TuneSpec(
        path=path,
        document=document,
        scenario=scenario,
        policy=name,
        fixed=fixed,
        dims=dims,
        objectives=objectives,
        slos=slos,
        seeds=[(scenario.seed + i) % 2**64 for i in range(n_seeds)],
        cases=[v.name for v in scenario.variants()],
        batch=list(batch),
        services=services,
        trials=n_trials,
        sampler=chosen_sampler,
        overrides=overrides,
        traces=traces,
        fidelity=chosen_fidelity,
        window_s=window_s,
    )
    if chosen_fidelity == "window":
        trace_speed(spec)  # one speed, so a window's trace time is a simulated time
    return spec


def window_seconds(text: str, where: str) -> float:
    """A window in trace time: "1h", "30m", "90s", "1d", or seconds."""
    from sim.duration import parse_duration

    t = text.strip()
    scale = {"h": 3600.0, "d": 86_400.0}.get(t[-1:], None)
    try:
        s = float(t[:-1]) * scale if scale is not None else parse_duration(t) / 1e9
    except ValueError as err:
        raise ScenarioError(f"{where}: {err}" if scale is None else f'{where}: a duration such as "1h" or "30m" (got {text!r})') from None
    if not (math.isfinite(s) and s > 0):
        raise ScenarioError(f"{where}: must be > 0 (got {text!r})")
    return s


__all__ = ["SAMPLERS", "Sense", "TuneSpec", "TuneTable", "build_spec"]
