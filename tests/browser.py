"""An HTML report as a person sees it: Debian's headless Chromium loads a copy of the page with
a capturing script injected first in <head>, which records every JavaScript error (uncaught,
unhandled rejection, console.error/console.warn, a resource that failed to load) and, once the
page has loaded and Plotly has drawn, what each plot container holds. `--dump-dom` hands that
record back as JSON. `screenshot` renders the page itself (no injection) to a PNG."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

WINDOW = (1200, 1600)  # CSS pixels; the check and the screenshot lay the page out alike

CAPTURE = """<script>
(() => {
  const errors = [];
  const say = (what) => errors.push(String(what));
  addEventListener("error", (e) => {
    if (e instanceof ErrorEvent) say(`uncaught ${e.message} (${e.filename}:${e.lineno})`);
    else say(`failed to load ${e.target && (e.target.src || e.target.href || e.target.tagName)}`);
  }, true);
  addEventListener("unhandledrejection", (e) => say(`unhandled rejection: ${e.reason && (e.reason.stack || e.reason)}`));
  for (const level of ["error", "warn"]) {
    const original = console[level].bind(console);
    console[level] = (...args) => { say(`console.${level}: ${args.map(String).join(" ")}`); original(...args); };
  }
  const drawn = (path) => { const d = path.getAttribute("d") || ""; return d.length > 2 && !d.includes("NaN"); };
  addEventListener("load", () => setTimeout(() => {
    const plots = [...document.querySelectorAll(".plotly-graph-div")].map((gd) => {
      const traces = [...gd.querySelectorAll(".cartesianlayer g.trace")];
      const box = gd.getBoundingClientRect();
      const title = gd._fullLayout && gd._fullLayout.title && gd._fullLayout.title.text;
      return {
        title: title || null,
        rendered: Boolean(gd._fullLayout),
        svgs: gd.querySelectorAll("svg.main-svg").length,
        data: (gd._fullData || []).filter((t) => t.visible === true).length,  // Plotly hides a trace of no points
        traces: traces.length,
        marks: traces.map((t) => [...t.querySelectorAll("path")].filter(drawn).length),
        box: [box.left + scrollX, box.top + scrollY, box.width, box.height],
      };
    });
    const remote = performance.getEntriesByType("resource").map((r) => r.name).filter((n) => !/^(data|file|blob):/.test(n));
    const out = document.createElement("pre");
    out.id = "colosim-check";
    out.textContent = JSON.stringify({ errors, plots, remote, plotly: typeof Plotly !== "undefined" });
    document.body.appendChild(out);
  }, 500));
})();
</script>
"""


def chromium() -> str | None:
    """The Chromium binary (Debian's `chromium`), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(url: str, *flags: str, timeout: float = 120) -> str:
    """Headless Chromium on `url` with the machine's flags (no background networking: the
    network is closed) and a fresh profile; its stdout."""
    exe = chromium()
    assert exe, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="colosim-chromium-") as profile:
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--virtual-time-budget=10000",  # virtual ms: the load, Plotly's drawing, the check's timer
            *flags,
            url,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


@dataclass
class Page:
    errors: list[str]  # JavaScript errors and warnings, in order
    # per plot container: its title, rendered (by Plotly), svgs (main-svg), data (traces
    # Plotly shows), traces (drawn: <g class="trace">), marks (drawn paths per trace), box (x, y, w, h)
    plots: list[dict]
    remote: list[str]  # resources fetched from outside the file (none: it opens offline)
    plotly: bool  # plotly.js was defined


def load(report: Path, workdir: Path) -> Page:
    """Load `report` (a copy with the capturing script) in headless Chromium; what it saw."""
    text = report.read_text(encoding="utf-8")
    head = re.search(r"<head[^>]*>", text)
    assert head, f"{report}: no <head>"
    page = workdir / f"{report.stem}.checked.html"
    page.write_text(text[: head.end()] + CAPTURE + text[head.end() :], encoding="utf-8")
    dom = _run(page.resolve().as_uri(), "--dump-dom")
    found = re.search(r'<pre id="colosim-check">(.*?)</pre>', dom, re.S)
    assert found, f"{report}: the page never finished loading (no check record in the DOM)"
    return Page(**json.loads(html.unescape(found.group(1))))


def screenshot(report: Path, png: Path) -> Path:
    """`report` as a person sees it at the top of the page, WINDOW-sized, to `png`."""
    _run(report.resolve().as_uri(), f"--screenshot={png}")
    assert png.exists(), f"chromium wrote no screenshot of {report}"
    return png


def problems(page: Page, expected: list[tuple[str, int]]) -> list[str]:
    """What is wrong with a loaded report that should draw `expected`: (title, traces with
    points) per plot, in order. Empty when every plot is drawn and nothing went wrong."""
    out = [f"JavaScript: {e}" for e in page.errors]
    out += [f"fetched from outside the file: {r}" for r in page.remote]
    if not page.plotly:
        out.append("plotly.js is not defined")
    got = [p["title"] for p in page.plots]
    want = [t for t, _ in expected]
    if got != want:
        out.append(f"plots on the page {got}, the report meant {want}")
    for p, (_, ntraces) in zip(page.plots, expected, strict=False):
        name = p["title"] or "untitled plot"
        if not p["rendered"] or p["svgs"] < 1:
            out.append(f"{name}: not rendered by Plotly ({p['svgs']} main-svg)")
        if p["data"] != ntraces or p["traces"] != ntraces:
            out.append(f"{name}: {p['traces']} traces drawn of {p['data']} Plotly shows, the report meant {ntraces}")
        if not any(p["marks"]):
            out.append(f"{name}: no trace drew anything (marks per trace {p['marks']})")
        if p["box"][2] < 100 or p["box"][3] < 100:
            out.append(f"{name}: {p['box'][2]:.0f}x{p['box'][3]:.0f} px on the page")
    return out


def intended(figures) -> list[tuple[str, int]]:
    """(title, traces with points) of each Plotly figure a report meant to draw."""

    def points(v) -> int:
        return 0 if v is None else len(v)

    return [(f.layout.title.text, sum(1 for t in f.data if points(t.x) or points(t.y))) for f in figures]
