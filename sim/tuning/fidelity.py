"""Multi-fidelity trials (`[tune] fidelity = "window"`): a trial first runs each trace's
busiest window, and only a promising one runs the whole trace set.

The busiest window of a trace is the `window` (trace time, default an hour) with the most
CPU demand, among the part of the trace the full run plays and measures: the trace-driven
workloads play it from each entity's first sample, `speed` trace seconds per simulated second,
for the scenario's duration, and the first `warmup` of it is not measured. Demand is the sum of
the entities' `cpu_cores` (the `node` entities only when the trace has nothing else: a node's
row already holds its containers'), each held from one sample to the next as the player
holds it. The window run plays the trace from one warm-up before the window (so its measured
part is the window) for warm-up + window ÷ speed; a trace whose played part is no longer than
that runs whole, once, and its measurement serves both stages.

After the windows, the trial reports one intermediate value per window (step i: the objective
over windows 1..i, aggregated as the whole study aggregates cases, and below every feasible
value when a window broke an SLO) and asks the pruner. Optuna's SuccessiveHalvingPruner with
one rung at the last window keeps the best third of the trials by their window score (a fixed
share, whatever the number of machines — the WilcoxonPruner pairs machines too, but with p <
0.1 it cannot prune below four traces); a pruned trial is PRUNED and never the answer. The
defaults trial is never pruned (it is the baseline) but its window score competes.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import ScenarioError
from sim.tuning.evaluate import Measurement, case_name, measure
from sim.tuning.goals import Sense
from sim.tuning.outcome import UNMEASURABLE, Outcome, summarize
from traces.format import Entity, Trace

if TYPE_CHECKING:
    from optuna import Study, Trial
    from optuna.pruners import BasePruner

    from sim.tuning.spec import TuneSpec

FIDELITIES = ("full", "window")
DEFAULT_WINDOW_S = 3600.0
KEEP_ONE_IN = 3  # successive halving's reduction factor: a third of the trials run whole


# --- the busiest window ---------------------------------------------------------------


def demand_entities(trace: Trace) -> list[Entity]:
    others = [e for e in trace.entities.values() if e.role != "node"]
    return others or list(trace.entities.values())


def _held(values: np.ndarray) -> np.ndarray:
    """NaN (not recorded) holds the previous value, as the player does; a leading NaN is 0."""
    out = np.array(values, dtype=float)
    last = 0.0
    for i, v in enumerate(out):
        if math.isnan(v):
            out[i] = last
        else:
            last = v
    return out


def _integral(e: Entity) -> Callable[[np.ndarray], np.ndarray]:
    """x ↦ CPU-seconds of the entity over played time [0, x) (its last value holds on)."""
    p = e.t_s - e.t_s[0]
    v = _held(e.cpu_cores)
    at = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(p))])

    def f(x: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(p, x, side="right") - 1, 0, None)
        return np.where(x <= 0, 0.0, at[k] + v[k] * (x - p[k]))

    return f


def busiest(trace: Trace, window_s: float, lo_s: float, hi_s: float) -> tuple[float, float]:
    """(start, CPU-seconds) of the window [s, s + window_s) with the most demand, s in
    [lo_s, hi_s] (played time); the earliest of equals. The integral is piecewise linear in
    s with kinks where the window's start or end crosses a sample, so those are the
    candidates."""
    entities = [e for e in demand_entities(trace) if len(e)]
    if not entities or hi_s < lo_s:
        return lo_s, 0.0
    points = [lo_s, hi_s]
    for e in entities:
        p = e.t_s - e.t_s[0]
        points += [*p, *(p - window_s)]
    s = np.unique(np.array(points))
    s = s[(s >= lo_s) & (s <= hi_s)]
    fs = [_integral(e) for e in entities]
    total = sum((f(s + window_s) - f(s) for f in fs), np.zeros(len(s)))
    best = float(total.max())
    i = int(np.argmax(total >= best - 1e-9 * max(1.0, abs(best))))
    return float(s[i]), float(total[i])


def cut(trace: Trace, start_s: float, end_s: float) -> Trace:
    """The trace's played time [start, end), shifted to start at 0: each entity's samples in
    it, and at 0 the value in effect at `start`."""
    out = Trace(source=f"{trace.source} [{start_s:g}, {end_s:g}) s of played time")
    for e in trace.entities.values():
        if not len(e):
            continue
        p = e.t_s - e.t_s[0]
        first = max(int(np.searchsorted(p, start_s, side="right")) - 1, 0)
        keep = np.concatenate([[first], np.flatnonzero((p > start_s) & (p < end_s))])
        t = np.concatenate([[0.0], p[keep[1:]] - start_s])
        out.add(
            Entity(
                e.name,
                e.role,
                t,
                e.cpu_cores[keep],
                None if e.memory_bytes is None else e.memory_bytes[keep],
                None if e.rate_per_s is None else e.rate_per_s[keep],
                e.cpu_request,
                e.cpu_limit,
                e.memory_request,
                e.memory_limit,
            )
        )
    return out


@dataclass(frozen=True)
class Window:
    """One trace's first-stage run: its busiest window, or (file None) the whole trace."""

    trace: str
    file: str | None
    start_s: float  # played trace time of the measured window
    end_s: float
    duration_s: float  # of the window run, simulated

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.trace, "start_s": self.start_s, "end_s": self.end_s, "whole": self.file is None}


def trace_speed(spec: TuneSpec) -> float:
    refs = [getattr(w, "trace", None) for w in spec.scenario.workloads.values()]
    speeds = {float(r.speed) for r in refs if r is not None}
    if len(speeds) != 1:
        raise ScenarioError(
            "tune.fidelity: window needs the trace-driven workloads to play at one speed"
            + (f" (they have {', '.join(f'{s:g}' for s in sorted(speeds))})" if speeds else " (the scenario has none)")
        )
    return speeds.pop()


def windows(spec: TuneSpec, directory: Path) -> list[Window]:
    """Each trace's busiest window, its cut written into `directory`."""
    from traces.player import load

    speed = trace_speed(spec)
    warm, whole = spec.scenario.warmup_s, spec.scenario.duration_s
    span, lead = whole * speed, warm * speed
    out = []
    for i, path in enumerate(spec.traces):
        run_s = warm + spec.window_s / speed
        if run_s >= whole:
            out.append(Window(path, None, lead, span, whole))
            continue
        trace = load(path)
        s, _ = busiest(trace, spec.window_s, lead, span - spec.window_s)
        file = cut(trace, s - lead, s + spec.window_s).write(directory / f"{i:03d}-{Path(path).stem}.parquet")
        out.append(Window(path, str(file), s, s + spec.window_s, run_s))
    return out


# --- staged trials ------------------------------------------------------------------------


def make_pruner(spec: TuneSpec) -> BasePruner | None:
    import optuna

    if spec.fidelity != "window":
        return None
    # one rung, checked at the last window (steps are 1..len(traces))
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=len(spec.traces), reduction_factor=KEEP_ONE_IN)


def window_value(spec: TuneSpec, outcome: Outcome) -> float:
    """What the pruner compares: the objective, or — a window broke an SLO, or measured
    nothing — a value below every feasible one that is the lower the larger the violation."""
    value = outcome.values[0]
    if outcome.feasible and not math.isnan(value):
        return value
    worst = min(max(outcome.constraints.values(), default=UNMEASURABLE), UNMEASURABLE)
    penalty = UNMEASURABLE + (worst if math.isfinite(worst) and worst > 0 else UNMEASURABLE)
    return -penalty if spec.objectives[0].sense is Sense.MAXIMIZE else penalty


def rename(m: Measurement, runs: list[str], src: str, dst: str) -> Measurement:
    """A measurement of trace `src`'s cases as trace `dst`'s."""
    names = {case_name(r, src): case_name(r, dst) for r in runs}
    return [{names.get(c, c): v for c, v in per_case.items()} for per_case in m]


def merge(parts: list[Measurement]) -> Measurement:
    out: Measurement = [{} for _ in parts[0]]
    for part in parts:
        for i, per_case in enumerate(part):
            out[i].update(per_case)
    return out


# a run to submit: (overrides, traces) — the study makes its job of them
Run = tuple[dict[str, Any], list[str]]


@dataclass
class _Trial:
    overrides: dict[str, Any]
    waiting: int
    windows: dict[int, Measurement] = field(default_factory=dict)
    error: BaseException | None = None
    whole: bool = False  # the whole stage is running


@dataclass
class Next:
    """What to do after one of a trial's runs came back: submit `runs` for it; tell `told`
    (a finished future: the trial's whole measurement or its error); `done`: it is finished
    (told here, or to be told with `told`)."""

    runs: list[Run]
    told: cf.Future[Any] | None = None
    done: bool = False


class Staging:
    """Trials through the window stage, then (unless pruned) the whole one. The study
    submits the runs `first` and `arrived` give and hands each finished one back."""

    def __init__(self, spec: TuneSpec, directory: Path) -> None:
        self.spec = spec
        self.windows = windows(spec, directory)
        self.trials: dict[int, _Trial] = {}
        self.index: dict[cf.Future[Any], int] = {}  # a window run's future -> its window
        self.solo = self._solo()

    def _overrides(self, w: Window, base: dict[str, Any]) -> dict[str, Any]:
        return base if w.file is None else {**base, "scenario.duration": w.duration_s}

    def _played(self, w: Window) -> str:
        return w.trace if w.file is None else w.file

    def _solo(self) -> list[Measurement]:
        """The service alone in each window (what `solo` means in a window's SLO)."""
        spec = self.spec
        off = {**spec.overrides, **{f"workloads.{b}.enabled": False for b in spec.batch}}
        out = []
        for w in self.windows:
            m = measure(spec.document, self._overrides(w, off), spec.seeds, spec.cases, spec.batch, [self._played(w)])
            out.append(rename(m, spec.cases, self._played(w), w.trace))
        return out

    def simulated_s(self, stage: str) -> float:
        """Simulated seconds one trial's stage costs (every seed and case)."""
        n = len(self.spec.seeds) * len(self.spec.cases)
        if stage == "window":
            return n * sum(w.duration_s for w in self.windows)
        return n * self.spec.scenario.duration_s * sum(w.file is not None for w in self.windows)

    def first(self, trial: Trial, overrides: dict[str, Any]) -> list[Run]:
        """The trial's window runs, in window order (hand each future to `track`)."""
        self.trials[trial.number] = _Trial(overrides, len(self.windows))
        return [(self._overrides(w, overrides), [self._played(w)]) for w in self.windows]

    def track(self, future: cf.Future[Any], window: int) -> None:
        self.index[future] = window

    def arrived(self, study: Study, trial: Trial, future: cf.Future[tuple[int | list[str], Measurement]]) -> Next:
        import optuna

        state = self.trials[trial.number]
        index = self.index.pop(future, None)
        if index is None:  # the whole stage's run
            del self.trials[trial.number]
            return Next([], self._final(state, future), done=True)
        try:
            w = self.windows[index]
            state.windows[index] = rename(future.result()[1], self.spec.cases, self._played(w), w.trace)
        except Exception as err:  # noqa: BLE001 - told as the trial's failure below
            state.error = state.error or err
        state.waiting -= 1
        if state.waiting:
            return Next([])
        if state.error is not None:
            del self.trials[trial.number]
            failed: cf.Future[Any] = cf.Future()
            failed.set_exception(state.error)
            return Next([], failed, done=True)
        trial.set_user_attr("windows", [w.to_dict() for w in self.windows])
        if self._report(trial, state):
            del self.trials[trial.number]
            trial.set_user_attr("simulated_s", self.simulated_s("window"))
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return Next([], done=True)
        trial.set_user_attr("simulated_s", self.simulated_s("window") + self.simulated_s("whole"))
        long = [w.trace for w in self.windows if w.file is not None]
        if not long:
            del self.trials[trial.number]
            return Next([], self._final(state, None), done=True)
        state.whole = True
        return Next([(state.overrides, long)])

    def _report(self, trial: Trial, state: _Trial) -> bool:
        """Report the windows' running score (step i: windows 1..i) and ask the pruner."""
        spec = self.spec
        score = math.nan
        for i in range(len(self.windows)):
            upto = merge([state.windows[j] for j in range(i + 1)])
            outcome = summarize(upto, merge(self.solo[: i + 1]), spec.objectives, spec.slos, spec.metrics)
            score = window_value(spec, outcome)
            trial.report(score, step=i + 1)
        trial.set_user_attr("window_score", score)
        pruned = trial.should_prune()
        return pruned and not trial.user_attrs.get("defaults")

    def _final(
        self, state: _Trial, whole: cf.Future[tuple[int | list[str], Measurement]] | None
    ) -> cf.Future[tuple[int | list[str], Measurement]]:
        """The trial's whole measurement: the traces run whole in the first stage, with the
        rest from the whole stage."""
        done: cf.Future[tuple[int | list[str], Measurement]] = cf.Future()
        parts = [state.windows[i] for i, w in enumerate(self.windows) if w.file is None]
        pid: int | list[str] = 0
        if whole is not None:
            try:
                pid, m = whole.result()
            except Exception as err:  # noqa: BLE001 - the trial fails with it
                done.set_exception(err)
                return done
            parts.append(m)
        done.set_result((pid, merge(parts)))
        return done
