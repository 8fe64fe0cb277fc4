"""The study's HTML report, self-contained (plotly.js inlined): optimization history, the
trade-off (objective against the SLO's metric, or the Pareto front), parameter importances,
and the best configuration beside the defaults (latency percentiles and batch throughput)."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim.report import figures_html, write_page
from sim.tuning.output import best_trial, complete, defaults_trial, feasible, pareto_trials, summary_text
from sim.tuning.spec import TuneSpec

if TYPE_CHECKING:
    from optuna import Study


def history_figure(spec: TuneSpec, study: Study) -> go.Figure | None:
    trials = complete(study)
    if not trials:
        return None
    o = spec.objectives[0]
    fig = go.Figure()
    ok = [t for t in trials if feasible(t)]
    bad = [t for t in trials if not feasible(t)]
    fig.add_scatter(x=[t.number for t in ok], y=[t.values[0] for t in ok], mode="markers", name="meets every SLO")
    fig.add_scatter(
        x=[t.number for t in bad], y=[t.values[0] for t in bad], mode="markers", name="violates an SLO", marker={"color": "lightgray"}
    )
    best, running = [], None
    better = max if o.sense.value == "maximize" else min
    for t in sorted(ok, key=lambda t: t.number):
        running = t.values[0] if running is None else better(running, t.values[0])
        best.append((t.number, running))
    if best:
        fig.add_scatter(x=[n for n, _ in best], y=[v for _, v in best], mode="lines", line={"shape": "hv"}, name="best so far")
    fig.update_layout(title="Optimization history", xaxis_title="trial", yaxis_title=f"{o.text} ({o.unit()}, mean over seeds)")
    return fig


def tradeoff_figure(spec: TuneSpec, study: Study) -> go.Figure | None:
    """Multi-objective: the first two objectives, the Pareto front highlighted.  Constrained:
    the objective against the first SLO's metric (worst case), with the SLO's limit."""
    trials = complete(study)
    if not trials:
        return None
    fig = go.Figure()
    default = defaults_trial(study)
    if spec.multi:
        a, b = spec.objectives[0], spec.objectives[1]
        front = {t.number for t in pareto_trials(spec, study)}
        for label, group, style in (
            ("Pareto set", [t for t in trials if t.number in front], {"size": 10}),
            ("dominated or violating", [t for t in trials if t.number not in front], {"color": "lightgray"}),
        ):
            fig.add_scatter(
                x=[t.values[1] for t in group],
                y=[t.values[0] for t in group],
                mode="markers",
                name=label,
                marker=style,
                text=[f"#{t.number}" for t in group],
            )
        x_title, y_title = f"{b.text} ({b.unit()})", f"{a.text} ({a.unit()})"
        if default is not None and default.values:
            fig.add_scatter(
                x=[default.values[1]], y=[default.values[0]], mode="markers", name="defaults", marker={"symbol": "x", "size": 12}
            )
        fig.update_layout(title="Pareto front")
    else:
        if not spec.slos:
            return None
        slo = spec.slos[0]
        m = slo.metric.text
        xs = [(t.user_attrs.get("summary") or {}).get(m, {}).get("worst") for t in trials]
        fig.add_scatter(
            x=xs,
            y=[t.values[0] for t in trials],
            mode="markers",
            name="trials",
            text=[f"#{t.number}" for t in trials],
            marker={"color": ["#1f77b4" if feasible(t) else "lightgray" for t in trials]},
        )
        best = best_trial(spec, study)
        for label, t, sym in (("defaults", default, "x"), ("best", best, "star")):
            if t is not None and t.values:
                fig.add_scatter(
                    x=[(t.user_attrs.get("summary") or {}).get(m, {}).get("worst")],
                    y=[t.values[0]],
                    mode="markers",
                    name=label,
                    marker={"symbol": sym, "size": 14},
                )
        x_title = f"{m} ({slo.metric.unit()}, worst case)"
        y_title = f"{spec.objectives[0].text} ({spec.objectives[0].unit()})"
        fig.update_layout(title=f"Trade-off (gray: violates {slo.text})")
    fig.update_layout(xaxis_title=x_title, yaxis_title=y_title)
    return fig


def importance_figure(spec: TuneSpec, study: Study) -> go.Figure | None:
    import optuna

    if len(spec.dims) < 2 or len(complete(study)) < 4:
        return None
    import warnings

    # Importances for the first objective, signed so that lower is better (as the evaluator
    # assumes); infeasible trials are left out (they are not what the search is after).
    sign = -1.0 if spec.objectives[0].sense.value == "maximize" else 1.0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.visualization.plot_param_importances(
                study, target=lambda t: sign * t.values[0], target_name=f"{spec.objectives[0].text}"
            )
    except (ValueError, RuntimeError, ZeroDivisionError):  # e.g. every trial gave the same value
        return None


def comparison_figure(spec: TuneSpec, study: Study) -> go.Figure | None:
    default = defaults_trial(study)
    chosen = best_trial(spec, study) if not spec.multi else None
    if default is None or chosen is None or not default.values:
        return None
    stats = ("p50", "p90", "p99", "p999")
    fig = make_subplots(
        rows=1, cols=len(spec.services) + 1, subplot_titles=[f"{s} latency (worst case)" for s in spec.services] + ["batch CPU (mean)"]
    )
    for label, t, color in (("defaults", default, "#7f7f7f"), (f"best (#{chosen.number})", chosen, "#2ca02c")):
        summary = t.user_attrs.get("summary") or {}
        for i, svc in enumerate(spec.services, start=1):
            ys = [(summary.get(f"{svc}.{s}", {}).get("worst") or math.nan) * 1000 for s in stats]
            fig.add_bar(x=list(stats), y=ys, name=label, marker_color=color, showlegend=(i == 1), row=1, col=i)
            fig.update_yaxes(title_text="ms", row=1, col=i)
        fig.add_bar(
            x=["batch_cpu"],
            y=[summary.get("batch_cpu", {}).get("mean")],
            name=label,
            marker_color=color,
            showlegend=not spec.services,
            row=1,
            col=len(spec.services) + 1,
        )
    fig.update_yaxes(title_text="CPU·s", row=1, col=len(spec.services) + 1)
    fig.update_layout(title="Best against the defaults", barmode="group")
    return fig


def machines_figure(spec: TuneSpec, study: Study) -> go.Figure | None:
    """A trace set: per machine, the objective and each SLO's metric (worst), the defaults
    beside the best (the study's verdict is the worst machine's)."""
    default = defaults_trial(study)
    chosen = best_trial(spec, study) if not spec.multi else None
    if not spec.traces or chosen is None or not chosen.user_attrs.get("machines"):
        return None
    o = spec.objectives[0]
    titles = [f"{o.text} ({o.unit()})"] + [f"{s.metric.text} ({s.metric.unit()}, worst)" for s in spec.slos]
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
    for label, t, color in (("defaults", default, "#7f7f7f"), (f"best (#{chosen.number})", chosen, "#2ca02c")):
        per = (t.user_attrs.get("machines") or {}) if t is not None else {}
        names = list(per)
        fig.add_bar(x=names, y=[per[n]["objective"].get(o.text) for n in names], name=label, marker_color=color, row=1, col=1)
        for i, slo in enumerate(spec.slos, start=2):
            ys = [per[n]["metrics"].get(slo.metric.text) for n in names]
            fig.add_bar(x=names, y=ys, name=label, marker_color=color, showlegend=False, row=1, col=i)
    fig.update_layout(title="Per machine of the trace set", barmode="group")
    return fig


def figures(spec: TuneSpec, study: Study) -> list[go.Figure]:
    """The report's plots, in order: those the study has data for."""
    made = (
        history_figure(spec, study),
        tradeoff_figure(spec, study),
        importance_figure(spec, study),
        comparison_figure(spec, study),
        machines_figure(spec, study),
    )
    return [fig for fig in made if fig is not None]


def write_report(spec: TuneSpec, study: Study, name: str, path: Path) -> Path:
    title = html.escape(f"colosim tune: {name}")
    body = f"""<h1>{title}</h1>
<pre>{html.escape(summary_text(spec, study, name))}</pre>
{figures_html(figures(spec, study))}"""
    return write_page(path, title, body)
