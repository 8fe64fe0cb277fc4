"""A self-contained HTML report of an experiment: opens offline, plotly.js inlined."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative  # type: ignore[attr-defined]  # plotly-stubs 0.1.4 lacks plotly.colors.qualitative
from plotly.subplots import make_subplots

from sim.results import PERCENTILES, ExperimentResult, RunResult


def write_report(result: ExperimentResult, path: str | Path, extra: Sequence[go.Figure] = ()) -> Path:
    """Write the report to `path`: the result tables, latency percentiles per run, and each
    cgroup's CPU share over time per run; `extra` figures after them (replay's probe)."""
    title = html.escape(f"colosim: {result.scenario}")
    body = f"""<h1>{title}</h1>
<p>seed {result.seed}, {result.duration_s:g} s simulated per run, measured after a
{result.warmup_s:g} s warm-up; changes are against the baseline run
<b>{html.escape(result.baseline)}</b>, as QoS changes: QPS run/baseline &minus; 1, latency
baseline/run &minus; 1 (negative = worse).</p>
<pre>{html.escape(str(result))}</pre>
{figures_html([*figures(result), *extra])}
{decisions_html(result)}"""
    return write_page(path, title, body)


def figures_html(figs: Sequence[go.Figure]) -> str:
    """The figures as HTML fragments, plotly.js inlined once (before the first): the page opens
    offline."""
    return "".join(fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"responsive": True}) for i, fig in enumerate(figs))


def write_page(path: str | Path, title: str, body: str) -> Path:
    """One self-contained HTML page (every colosim report: run, tune, fidelity) at `path`:
    `title` (already escaped) in the head, `body` as it is."""
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
  pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def figures(result: ExperimentResult) -> list[go.Figure]:
    """The report's plots, in order: those the result has data for."""
    made = (
        latency_figure(result),
        latency_over_time_figure(result),
        cpu_share_figure(result),
        trace_figure(result),
        memory_figure(result),
        io_figure(result),
        net_figure(result),
        throttling_figure(result),
        decisions_figure(result),
    )
    return [fig for fig in made if fig is not None]


def _colors(names: list[str]) -> dict[str, str]:
    palette = qualitative.Plotly
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def latency_figure(result: ExperimentResult) -> go.Figure | None:
    """Grouped bars: P50/P90/P99/P99.9 of each service, one bar per run."""
    services = result.service_names
    if not services:
        return None
    labels = [f"P{p:g}" for p in PERCENTILES]
    fig = make_subplots(
        rows=len(services),
        cols=1,
        subplot_titles=services,
        vertical_spacing=0.12 if len(services) > 1 else 0.0,
    )
    colors = _colors(list(result.runs))
    for row, svc in enumerate(services, start=1):
        for name, run in result.runs.items():
            service = run.services.get(svc)
            if service is None:
                continue
            values = [service.percentile(p) for p in PERCENTILES]
            fig.add_bar(
                x=labels,
                # None: a gap (no bar); plotly-stubs 0.1.4 types y as numbers only
                y=[v if math.isfinite(v) else None for v in values],  # type: ignore[arg-type]
                name=name,
                legendgroup=name,
                showlegend=row == 1,
                marker_color=colors[name],
                hovertemplate="%{x}: %{y:.3s}s<extra>" + name.replace("%", "%%") + "</extra>",
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text="latency (s)", row=row, col=1)
    fig.update_layout(
        title="Latency percentiles (after warm-up)",
        barmode="group",
        height=380 * len(services) + 80,
        legend={"orientation": "h", "y": -0.15},
    )
    return fig


def _run_panels(runs: list[RunResult]) -> go.Figure:
    """One panel per run, stacked, sharing the time axis."""
    return make_subplots(
        rows=len(runs),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[r.name for r in runs],
        # plotly needs spacing <= 1 / (rows - 1); many runs get thinner gaps
        vertical_spacing=min(0.08, 0.5 / max(len(runs) - 1, 1)),
    )


def cpu_share_figure(result: ExperimentResult) -> go.Figure | None:
    """Per run, each cgroup's share of node capacity per sample interval, whole run."""
    runs = [r for r in result.runs.values() if len(r.timeseries.t_s)]
    if not runs:
        return None
    fig = _run_panels(runs)
    colors = _colors(result.cgroup_names)
    for row, run in enumerate(runs, start=1):
        for cg, share in run.timeseries.cpu_share.items():
            fig.add_scatter(
                x=run.timeseries.t_s,
                y=share * 100,
                mode="lines",
                line={"shape": "hv", "color": colors.get(cg)},
                name=cg,
                legendgroup=cg,
                showlegend=row == 1,
                hovertemplate="%{x:.2f}s: %{y:.1f}%<extra>" + cg + "</extra>",
                row=row,
                col=1,
            )
        if result.warmup_s > 0:
            fig.add_vrect(
                x0=0,
                x1=result.warmup_s,
                fillcolor="#999",
                opacity=0.15,
                line_width=0,
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text="CPU %", rangemode="tozero", row=row, col=1)
    return _finish_time_panels(fig, len(runs), "CPU share of node capacity per cgroup (grey: warm-up)", 260, -0.1)


def latency_over_time_figure(result: ExperimentResult, bins: int = 60) -> go.Figure | None:
    """Each service's mean latency per time bin, one line per run (seed 001 case 3's
    "download time as downloads go on"); only when memory is modelled, where it moves."""
    if not any(r.node_memory for r in result.runs.values()):
        return None
    fig = go.Figure()
    colors = _colors(list(result.runs))
    for name, run in result.runs.items():
        for svc, s in run.services.items():
            if not len(s.completions_s):
                continue
            edges = np.linspace(run.warmup_s, run.duration_s, bins + 1)
            idx = np.clip(np.searchsorted(edges, s.completions_s, side="right") - 1, 0, bins - 1)
            sums = np.bincount(idx, weights=s.latencies_s, minlength=bins)
            counts = np.bincount(idx, minlength=bins)
            mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            label = f"{name}: {svc}" if len(run.services) > 1 else name
            fig.add_scatter(
                x=(edges[:-1] + edges[1:]) / 2, y=mean * 1000, mode="lines+markers", name=label, line={"color": colors.get(name)}
            )
    fig.update_layout(title="Mean request latency over the run (ms)", xaxis_title="simulated time (s)", yaxis_title="ms", height=420)
    return fig


def trace_figure(result: ExperimentResult) -> go.Figure | None:
    """Per run and trace-driven workload: what the trace asks (cores, or requests/s) beside
    what the simulation gave (its cgroup's cores, or completions/s), per sample."""
    items = [(r, w, d) for r in result.runs.values() for w, d in r.trace_demand.items() if len(r.timeseries.t_s)]
    if not items:
        return None
    fig = make_subplots(
        rows=len(items),
        cols=1,
        subplot_titles=[f"{r.name}: {w}" for r, w, _ in items],
        vertical_spacing=min(0.08, 0.5 / max(len(items) - 1, 1)),
    )
    for row, (run, w, (key, cg, t, v)) in enumerate(items, start=1):
        ts = run.timeseries
        if key == "cores":
            got, unit = ts.cpu_share.get(cg, np.zeros(len(ts.t_s))) * run.ncpus, "cores"
        else:
            dt = np.diff(np.concatenate([[0.0], ts.t_s]))
            got, unit = ts.completions.get(w, np.zeros(len(ts.t_s))) / np.where(dt > 0, dt, 1), "requests/s"
        fig.add_scatter(
            x=t, y=v, mode="lines", line={"shape": "hv", "dash": "dot", "color": "#444"}, name="trace", showlegend=row == 1, row=row, col=1
        )
        fig.add_scatter(
            x=ts.t_s, y=got, mode="lines", line={"shape": "hv", "color": "#1f77b4"}, name="simulated", showlegend=row == 1, row=row, col=1
        )
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    return _finish_time_panels(fig, len(items), "Trace demand and what the simulation gave", 260, -0.1)


def _per_cgroup_figure(result: ExperimentResult, series: str, scale: float, unit: str, title: str) -> go.Figure | None:
    """Per run, a per-cgroup time series (TimeSeries.<series>) of the leaves that have any,
    divided by `scale`, whole run."""

    def shown(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # leaves that have any (parents repeat their children)
        return {cg: v for cg, v in values.items() if v.any() and not any(c.startswith(cg + "/") for c in values)}

    # only runs with a series to draw: a panel (or a figure) of none is an empty plot
    runs = [r for r in result.runs.values() if len(r.timeseries.t_s) and shown(getattr(r.timeseries, series))]
    if not runs:
        return None
    fig = _run_panels(runs)
    colors = _colors(result.cgroup_names)
    for row, run in enumerate(runs, start=1):
        for cg, v in shown(getattr(run.timeseries, series)).items():
            fig.add_scatter(
                x=run.timeseries.t_s,
                y=v / scale,
                mode="lines",
                name=cg,
                legendgroup=cg,
                showlegend=row == 1,
                line={"color": colors.get(cg)},
                hovertemplate="%{x:.2f}s: %{y:.1f} " + unit + "<extra>" + cg + "</extra>",
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    return _finish_time_panels(fig, len(runs), title, 260, -0.1)


def memory_figure(result: ExperimentResult) -> go.Figure | None:
    """Per run, memory.current of each cgroup that held memory, whole run."""
    return _per_cgroup_figure(result, "memory", 2**20, "MiB", "memory.current per cgroup")


def io_figure(result: ExperimentResult) -> go.Figure | None:
    """Per run, each cgroup's disk throughput (read + write) over time."""
    return _per_cgroup_figure(result, "io_rate", 1e6, "MB/s", "Disk throughput per cgroup (read + write)")


def net_figure(result: ExperimentResult) -> go.Figure | None:
    """Per run, each cgroup's egress throughput over time."""
    return _per_cgroup_figure(result, "net_rate", 1e6, "MB/s", "Bytes sent per cgroup")


def _finish_time_panels(fig: go.Figure, rows: int, title: str, row_height: int, legend_y: float) -> go.Figure:
    """Shared x axis label under the last of `rows` stacked time panels, title, legend."""
    fig.update_xaxes(title_text="simulated time (s)", row=rows, col=1)
    fig.update_layout(title=title, height=row_height * rows + 120, legend={"orientation": "h", "y": legend_y})
    return fig


def throttling_figure(result: ExperimentResult) -> go.Figure | None:
    """cpu.stat nr_throttled over time (cumulative, as a monitoring agent reads it), one
    panel per cgroup that was throttled in any run, one line per run."""
    throttled = [
        cg
        for cg in result.cgroup_names
        if any(cg in r.timeseries.nr_throttled and r.timeseries.nr_throttled[cg].sum() for r in result.runs.values())
    ]
    if not throttled:
        return None
    fig = make_subplots(rows=len(throttled), cols=1, shared_xaxes=True, subplot_titles=throttled)
    colors = _colors(list(result.runs))
    for row, cg in enumerate(throttled, start=1):
        for name, run in result.runs.items():
            series = run.timeseries.nr_throttled.get(cg)
            if series is None or not len(series):
                continue
            fig.add_scatter(
                x=run.timeseries.t_s,
                y=series.cumsum(),
                mode="lines",
                line={"shape": "hv", "color": colors[name]},
                name=name,
                legendgroup=name,
                showlegend=row == 1,
                hovertemplate="%{x:.2f}s: %{y}<extra>" + name.replace("%", "%%") + "</extra>",
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text="nr_throttled", rangemode="tozero", row=row, col=1)
    return _finish_time_panels(fig, len(throttled), "CFS bandwidth: throttled periods so far (cpu.stat nr_throttled)", 300, -0.15)


def decisions_html(result: ExperimentResult, most: int = 500) -> str:
    """Each run's policy decisions, in order, with the numbers behind them."""
    blocks = []
    for name, run in result.runs.items():
        if not run.decisions:
            continue
        lines = [f"t={d['t_s']:.2f}s {d['policy']}: {d['what']}" for d in run.decisions[:most]]
        if len(run.decisions) > most:
            lines.append(f"… {len(run.decisions) - most} more in results.json")
        blocks.append(
            f"<details><summary>{html.escape(name)}: {len(run.decisions)} policy decisions</summary>"
            f"<pre>{html.escape(chr(10).join(lines))}</pre></details>"
        )
    return "<h2>Policy decisions</h2>" + "".join(blocks) if blocks else ""


def decisions_figure(result: ExperimentResult) -> go.Figure | None:
    """A timeline of each run's policy decisions: one marker per decision, its reason on
    hover, so that a change in CPU share can be traced to the decision that caused it."""
    runs = [(name, run) for name, run in result.runs.items() if run.decisions]
    if not runs:
        return None
    fig = go.Figure()
    colors = _colors(list(result.runs))
    for name, run in runs:
        fig.add_scatter(
            x=[d["t_s"] for d in run.decisions],
            # a categorical axis (one row per run); plotly-stubs 0.1.4 types y as numbers only
            y=[name] * len(run.decisions),  # type: ignore[arg-type]
            mode="markers",
            marker={"color": colors[name], "size": 10, "symbol": "diamond"},
            name=name,
            text=[d["what"] for d in run.decisions],
            hovertemplate="%{x:.2f}s: %{text}<extra></extra>",
        )
    fig.update_xaxes(title_text="simulated time (s)", range=[0, result.duration_s])
    fig.update_layout(
        title="Policy decisions (hover for why)",
        height=260 + 50 * len(runs),
        showlegend=False,
        margin={"l": 220},
    )
    return fig
