"""What a finished study says: the best trial (or the Pareto set) against the defaults, as
tables, as a policy file that `colosim run --policy` and `colosim replay --policy` take, and
as an HTML report.  The selection is computed here from the stored trials (not by the
sampler), so every worker and every later reader agree on it."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.results import finite as finite_json
from sim.results import markdown, sig3
from sim.tuning.goals import Sense, Slo
from sim.tuning.space import Dimension, policy_table
from sim.tuning.spec import TuneSpec

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial


def complete(study: Study) -> list[FrozenTrial]:
    import optuna

    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in (trial.constraints or {}).values())


def defaults_trial(study: Study) -> FrozenTrial | None:
    return next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("defaults")), None)


def best_trial(spec: TuneSpec, study: Study) -> FrozenTrial | None:
    """The feasible trial with the best (first) objective; the earliest of equals."""
    ok = [t for t in complete(study) if feasible(t)]
    if not ok:
        return None
    sign = 1 if spec.objectives[0].sense is Sense.MAXIMIZE else -1
    return max(ok, key=lambda t: (sign * t.values[0], -t.number))


def pareto_trials(spec: TuneSpec, study: Study) -> list[FrozenTrial]:
    """Feasible trials no other feasible trial dominates, by trial number."""
    ok = [t for t in complete(study) if feasible(t)]
    signs = [1 if o.sense is Sense.MAXIMIZE else -1 for o in spec.objectives]

    def key(t: FrozenTrial) -> list[float]:
        return [s * v for s, v in zip(signs, t.values, strict=True)]

    def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
        return all(x >= y for x, y in zip(a, b, strict=True)) and any(x > y for x, y in zip(a, b, strict=True))

    keys = {t.number: key(t) for t in ok}
    return [t for t in ok if not any(dominates(keys[u.number], keys[t.number]) for u in ok if u is not t)]


def best_line(spec: TuneSpec, study: Study) -> str:
    """The progress bar's postfix: the best so far."""
    if spec.multi:
        return f"Pareto set {len(pareto_trials(spec, study))}"
    t = best_trial(spec, study)
    if t is None:
        return "no feasible trial yet"
    o = spec.objectives[0]
    return f"best {o.text} {sig3(t.values[0])} {o.unit()} (#{t.number})"


def _value(trial: FrozenTrial | None, metric: str, which: str) -> float:
    if trial is None:
        return math.nan
    v = (trial.user_attrs.get("summary") or {}).get(metric, {}).get(which)
    return math.nan if v is None else float(v)


def _change(new: float, old: float) -> str:
    if not (math.isfinite(new) and math.isfinite(old)) or old == 0:
        return "-"
    return f"{(new / old - 1) * 100:+.1f}%"


def _num(v: float, d: Dimension) -> float | int:
    return int(v) if d.param.integer else v


def _param(v: Any) -> str:
    return "-" if v is None else (str(v) if isinstance(v, int) else sig3(float(v)))


def summary_text(spec: TuneSpec, study: Study, name: str) -> str:
    import optuna

    S = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    n_done = sum(t.state is S.COMPLETE for t in trials)
    n_pruned = sum(t.state is S.PRUNED for t in trials)
    n_orphan = sum(t.state is S.FAIL and bool(t.user_attrs.get("orphaned")) for t in trials)
    n_fail = sum(t.state is S.FAIL for t in trials) - n_orphan
    n_ok = sum(t.state is S.COMPLETE and feasible(t) for t in trials)
    orphaned = f" and {n_orphan} orphaned by a killed study process (not counted)" if n_orphan else ""
    head = (
        f"study {name}: {len(trials) - n_orphan} trials ({n_done} complete, {n_pruned} pruned, {n_fail} failed){orphaned}, {n_ok} meet every SLO\n"
        f"policy {spec.policy}; objective{'s' if spec.multi else ''} "
        + ", ".join(f"{o.sense.value} {o.text}" for o in spec.objectives)
        + (
            f"; SLO {'; '.join(s.text for s in spec.slos)} (on the worst of {len(spec.seeds)} seed(s) × {len(spec.cases) * max(1, len(spec.traces))} case(s){' over ' + str(len(spec.traces)) + ' traces' if spec.traces else ''})"
            if spec.slos
            else ""
        )
    )
    parts = [head, simulated_line(spec, study)]
    default = defaults_trial(study)
    if default is not None and default.state is S.FAIL:
        parts.append(f"the defaults failed: {default.user_attrs.get('error', '?')}")
    if spec.multi:
        parts.append(pareto_table(spec, study, default))
    else:
        best = best_trial(spec, study)
        if best is None:
            parts.append("no trial met every SLO: nothing to recommend (widen the ranges, or relax the SLO)")
            near = closest_trial(study)
            if near is not None:
                parts.append(
                    f"closest: trial #{near.number} (worst SLO violation {sig3(max(near.constraints.values()))}): "
                    + ", ".join(f"{d.name}={_param(near.params.get(d.name))}" for d in spec.dims)
                )
            if default is not None:
                parts.append(metrics_table(spec, default, near, "closest"))
            shown = near if near is not None else default
            if spec.traces and shown is not None:
                parts.append(machines_table(spec, default, shown, "closest" if near is not None else "default"))
        else:
            parts.append(params_table(spec, default, best))
            parts.append(metrics_table(spec, default, best))
            if spec.traces:
                parts.append(machines_table(spec, default, best))
    failed = [t for t in trials if t.state is S.FAIL and t.user_attrs.get("error")]
    if failed:
        reasons: dict[str, int] = {}
        for t in failed:
            reasons[t.user_attrs["error"]] = reasons.get(t.user_attrs["error"], 0) + 1
        parts.append("failed trials:\n" + "\n".join(f"  {n} × {r}" for r, n in reasons.items()))
    return "\n\n".join(parts)


def simulated_s(study: Study) -> float:
    """Simulated seconds the study used: every trial's runs (a pruned one's windows only)
    and the service alone."""
    trials = study.get_trials(deepcopy=False)
    return math.fsum(float(t.user_attrs.get("simulated_s", 0.0)) for t in trials) + float(study.user_attrs.get("solo_simulated_s", 0.0))


def simulated_line(spec: TuneSpec, study: Study) -> str:
    fid = f"; fidelity window ({sig3(spec.window_s)} s of trace time per trace first)" if spec.fidelity == "window" else ""
    return f"simulated {sig3(simulated_s(study))} s in all (trials and the service alone){fid}"


def machines_table(spec: TuneSpec, default: FrozenTrial | None, best: FrozenTrial, label: str = "best") -> str:
    """Per machine (trace) of the set: the objective, each SLO's metric and verdict, for the
    defaults and the best; the study's SLO verdict is the worst machine's."""
    o = spec.objectives[0]
    header = ["machine", f"{o.text} default", f"{o.text} {label}"]
    for slo in spec.slos:
        header += [f"{slo.metric.text} default", f"{slo.metric.text} {label}", f"{slo.text} default", f"{slo.text} {label}"]
    rows = []
    d_m = (default.user_attrs.get("machines") or {}) if default is not None else {}
    b_m = best.user_attrs.get("machines") or {}
    for machine in b_m:
        d, b = d_m.get(machine) or {}, b_m[machine]
        row = [machine, sig3(_get(d, "objective", o.text)), sig3(_get(b, "objective", o.text))]
        for slo in spec.slos:
            row += [sig3(_get(d, "metrics", slo.metric.text)), sig3(_get(b, "metrics", slo.metric.text))]
            row += [_verdict(_get(d, "slo", slo.text)), _verdict(_get(b, "slo", slo.text))]
        rows.append(row)
    return "per machine (trace of the set)\n" + markdown(header, rows)


def _get(m: dict[str, Any], part: str, key: str) -> float:
    v = (m.get(part) or {}).get(key)
    return math.nan if v is None else float(v)


def _verdict(v: float) -> str:
    if math.isnan(v):
        return "-"
    return "holds" if v <= 0 else f"violated by {sig3(v)}"


def trials_json(spec: TuneSpec, study: Study) -> dict[str, Any]:
    """Every trial: state, parameters, values, SLO violations, per-machine results, the
    windows' score and the simulated time it cost."""
    best = best_trial(spec, study) if not spec.multi else None
    default = defaults_trial(study)
    out = []
    for t in study.get_trials(deepcopy=False):
        out.append(
            {
                "number": t.number,
                "state": t.state.name,
                "params": t.params,
                "values": t.values,
                "constraints": t.constraints,
                "machines": t.user_attrs.get("machines"),
                "window_score": t.user_attrs.get("window_score"),
                "simulated_s": t.user_attrs.get("simulated_s"),
                "error": t.user_attrs.get("error"),
            }
        )
    return {
        "objectives": [o.text for o in spec.objectives],
        "slo": [s.text for s in spec.slos],
        "traces": spec.traces,
        "fidelity": spec.fidelity,
        "window_s": spec.window_s if spec.fidelity == "window" else None,
        "best": None if best is None else best.number,
        "defaults": None if default is None else default.number,
        "simulated_s": simulated_s(study),
        "trials": out,
    }


def params_table(spec: TuneSpec, default: FrozenTrial | None, best: FrozenTrial) -> str:
    rows = [
        [d.name, f"[{_param(_num(d.low, d))}, {_param(_num(d.high, d))}]", _param(_num(d.default, d)), _param(best.params.get(d.name))]
        for d in spec.dims
    ]
    return f"best: trial #{best.number}\n" + markdown(["parameter", "range", "default", "best"], rows)


def _rows(spec: TuneSpec) -> list[tuple[str, str]]:
    """(metric, mean|worst) rows of the comparison: the objectives, the SLOs' metrics, each
    service's percentiles, batch CPU and utilization."""
    rows: list[tuple[str, str]] = []
    for o in spec.objectives:
        rows += [(o.text, "mean"), (o.text, "worst")]
    for s in spec.slos:
        rows.append((s.metric.text, "worst"))
    for svc in spec.services:
        rows += [(f"{svc}.{st}", "worst") for st in ("p50", "p99", "p999", "qps")]
    rows += [("batch_cpu", "mean"), ("utilization", "mean")]
    return list(dict.fromkeys(rows))


def closest_trial(study: Study) -> FrozenTrial | None:
    """With no feasible trial: the complete one whose worst SLO violation is least."""
    done = [t for t in complete(study) if t.constraints]
    return min(done, key=lambda t: (max(t.constraints.values()), t.number)) if done else None


def metrics_table(spec: TuneSpec, default: FrozenTrial | None, best: FrozenTrial | None, label: str = "best") -> str:
    units = {m.text: m.unit() for m in spec.metrics}
    rows = []
    for metric, which in _rows(spec):
        d, b = _value(default, metric, which), _value(best, metric, which)
        rows.append([f"{metric} ({which}, {units.get(metric, '')})", sig3(d), sig3(b), _change(b, d)])
    for slo in spec.slos:

        def verdict(t: FrozenTrial | None, slo: Slo = slo) -> str:
            if t is None or slo.text not in (t.constraints or {}):
                return "-"
            v = t.constraints[slo.text]
            return "holds" if v <= 0 else f"violated by {sig3(v)}"

        rows.append([f"SLO {slo.text}", verdict(default), verdict(best), ""])
    return f"default vs {label}\n" + markdown(["metric", "default", label, "change"], rows)


def pareto_table(spec: TuneSpec, study: Study, default: FrozenTrial | None) -> str:
    front = sorted(pareto_trials(spec, study), key=lambda t: t.values[0])
    header = ["trial", *(d.name for d in spec.dims), *(f"{o.text} (mean)" for o in spec.objectives)]
    rows = []
    for label, t in ([("defaults", default)] if default is not None and default.values else []) + [(f"#{t.number}", t) for t in front]:
        rows.append([label, *(_param(t.params.get(d.name)) for d in spec.dims), *(sig3(v) for v in t.values)])
    return f"Pareto set ({len(front)} trials meeting every SLO, none better in every objective)\n" + markdown(header, rows)


# --- the policy file ---------------------------------------------------------------------


def toml_value(v: Any) -> str:
    """A value as TOML writes it inline."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        # a TOML basic string takes JSON's escapes; DEL is a control character to TOML
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_value(str(k))} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def write_policy(spec: TuneSpec, trial: FrozenTrial, path: Path, note: str) -> Path:
    table = policy_table(spec.fixed, trial.params, spec.dims)
    lines = [f"# {line}" for line in note.splitlines()]
    lines += ["# Use: colosim run SCENARIO.toml --policy THIS_FILE (or colosim replay ... --policy THIS_FILE)", "", "[policy]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_agent_files(spec: TuneSpec, trial: FrozenTrial, directory: Path, prefix: str = "") -> list[Path]:
    """The trial's thresholds in the agent's own files beside its policy file (Koordinator: a
    NodeSLO patch and the slo-controller-config ConfigMap; rubik: config.json), which
    `--policy` reads back to the same policy (policies/formats)."""
    from policies.formats import write_files

    return write_files(policy_table(spec.fixed, trial.params, spec.dims), directory, prefix)


def write_outputs(spec: TuneSpec, study: Study, name: str, out: Path) -> list[Path]:
    """The policy file(s), the agent's own files and the HTML report."""
    written = []
    if spec.multi:
        for t in pareto_trials(spec, study):
            vals = ", ".join(f"{o.text} {sig3(v)}" for o, v in zip(spec.objectives, t.values, strict=True))
            written.append(
                write_policy(
                    spec, t, out / "pareto" / f"trial_{t.number}.toml", f"colosim tune: study {name}, Pareto trial #{t.number}: {vals}"
                )
            )
            written += write_agent_files(spec, t, out / "pareto", f"trial_{t.number}-")
    else:
        best = best_trial(spec, study)
        if best is not None:
            o = spec.objectives[0]
            written.append(
                write_policy(
                    spec,
                    best,
                    out / "tuned_policy.toml",
                    f"colosim tune: study {name}, best trial #{best.number}: {o.text} {sig3(best.values[0])} {o.unit()} (mean over seeds), every SLO held",
                )
            )
            written += write_agent_files(spec, best, out)
    from sim.tuning.report import write_report

    path = out / "tune_trials.json"
    path.write_text(json.dumps(finite_json(trials_json(spec, study)), indent=1) + "\n", encoding="utf-8")
    written.append(path)
    written.append(write_report(spec, study, name, out / "tune_report.html"))
    return written


__all__ = ["best_line", "best_trial", "complete", "defaults_trial", "feasible", "pareto_trials", "summary_text", "write_outputs"]
