"""The HTML report of `colosim fidelity`, made from its JSON document (so a fidelity.json can be
drawn again): per metric, host and simulator side by side for every (service, case) with
their intervals as error bars; the prediction errors; the tables the terminal prints."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from replay.fidelity import BATCH, METRICS, text
from sim.report import figures_html, write_page

HOST, SIM = "#1f77b4", "#ff7f0e"


def write_report(doc: dict[str, Any], path: Path) -> Path:
    body = f"""<h1>colosim fidelity{" (interrupted: partial)" if doc.get("interrupted") else ""}</h1>
<p><code>{html.escape(doc.get("command", ""))}</code></p>
<p>Every bar is a mean: the host's over its repetitions, the simulator's over its seeds; the
whiskers are 95% bootstrap intervals of the mean. Each service's model is calibrated once, on
its alone runs; the other cases are predictions.</p>
{figures_html(figures(doc))}
<pre>{html.escape(text(doc))}</pre>"""
    return write_page(path, "colosim fidelity", body)


def _bars(doc: dict[str, Any], metric: str) -> tuple[list[str], dict[str, list[tuple[float, float, float]]]]:
    labels: list[str] = []
    sides: dict[str, list[tuple[float, float, float]]] = {"host": [], "sim": []}
    for name, svc in doc["services"].items():
        for case, row in svc["scores"].items():
            s = row.get(metric)
            if s is None:
                continue
            labels.append(f"{name}: {case}")
            for side in sides:
                i = s[side]
                sides[side].append((i["mean"], i["lo"], i["hi"]) if i["n"] else (math.nan, math.nan, math.nan))
    return labels, sides


def _num(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def metric_figure(doc: dict[str, Any], metric: str) -> go.Figure | None:
    labels, sides = _bars(doc, metric)
    if not labels:
        return None
    fig = go.Figure()
    for side, color in (("host", HOST), ("sim", SIM)):
        values = sides[side]
        fig.add_bar(
            x=labels,
            y=[_num(m) for m, _, _ in values],  # type: ignore[arg-type]
            name="host" if side == "host" else "simulator",
            marker_color=color,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [_num(h - m) if m is not None else None for m, _, h in values],
                "arrayminus": [_num(m - lo) if m is not None else None for m, lo, _ in values],
            },
        )
    fig.update_layout(title=f"{metric}: host and simulator per case", barmode="group", height=420, yaxis_title=metric)
    return fig


def error_figure(doc: dict[str, Any]) -> go.Figure | None:
    """The prediction error (sim / host - 1) of each metric, per (service, case)."""
    fig = go.Figure()
    for metric in METRICS:
        labels, errors = [], []
        for name, svc in doc["services"].items():
            for case, row in svc["scores"].items():
                s = row.get(metric)
                if s is not None and s["error"] is not None and math.isfinite(s["error"]):
                    labels.append(f"{name}: {case}")
                    errors.append(s["error"] * 100)
        if labels:
            fig.add_bar(x=labels, y=errors, name=metric)
    if not fig.data:
        return None
    fig.add_hrect(y0=-10, y1=10, fillcolor="#2ca02c", opacity=0.1, line_width=0)
    fig.update_layout(
        title="Prediction error per case (%; green: within 10%)", barmode="group", height=420, yaxis_title="sim / host - 1 (%)"
    )
    return fig


def regime_figure(doc: dict[str, Any]) -> go.Figure | None:
    """The batch's share in every host repetition and every seed, per case whose batch has a
    regime to tell (sim/regimes.py), with the line below which a run counts as starved: a
    mean over runs that settled on both sides of it describes none of them."""
    points: dict[str, tuple[list[str], list[float]]] = {"host": ([], []), "sim": ([], [])}
    lines: tuple[list[str], list[float]] = ([], [])  # per case: its label, its starved line
    for name, svc in doc["services"].items():
        for case, r in (svc.get("regimes") or {}).items():
            label = f"{name}: {case}"
            lines[0].append(label)
            lines[1].append(r["threshold"])
            for side in points:
                for run in svc[side].get(case, []):
                    v = run.get(BATCH)
                    if v is not None and math.isfinite(v):
                        points[side][0].append(label)
                        points[side][1].append(v)
    if not lines[0]:
        return None
    fig = go.Figure()
    for side, color in (("host", HOST), ("sim", SIM)):
        x, y = points[side]
        fig.add_scatter(
            x=x,
            y=y,
            mode="markers",
            name="host repetitions" if side == "host" else "simulator seeds",
            marker={"color": color, "size": 9, "opacity": 0.7},
            offsetgroup=side,
        )
    fig.add_scatter(
        x=lines[0], y=lines[1], mode="markers", name="starved below", marker={"symbol": "line-ew-open", "size": 40, "color": "#d62728"}
    )
    fig.update_layout(
        title="The batch's share of the node in every run (below the red line: starved)",
        scattermode="group",
        height=420,
        yaxis_title="batch CPU (share of the node)",
    )
    return fig


def figures(doc: dict[str, Any]) -> list[go.Figure]:
    made = [metric_figure(doc, m) for m in METRICS] + [error_figure(doc), regime_figure(doc)]
    return [f for f in made if f is not None]
