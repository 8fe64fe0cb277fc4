"""The HTML reports as a person sees them: for every experiments/*.toml, `colosim run` (or, for a
tune_*.toml, `colosim tune`) writes its report, shortened, and headless Chromium loads it: no
JavaScript error, plotly.js inline (nothing fetched), and every plot the report meant to draw
rendered by Plotly with its traces drawn. One screenshot is checked by its pixels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import WINDOW, chromium, intended, load, problems, screenshot
from test_traces import SAMPLE
from test_traces import fixture as alibaba_fixture

from sim.cli import main

pytestmark = pytest.mark.skipif(
    chromium() is None, reason="chromium is not installed (Debian's `chromium`: `make host-packages` installs it, as root)"
)

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
SCENARIOS = sorted(p.stem for p in EXPERIMENTS.glob("*.toml"))

# Shortened runs: 2 simulated seconds unless a plot needs longer to have something to draw.
SHORT = ["scenario.duration=2s", "scenario.warmup=0.5s"]
LONGER = {
    "alibaba_machine": ["scenario.duration=120s"],  # its samples are 10 s apart: two trace hours at speed 60
    "quota_burst": ["scenario.duration=130s", "scenario.warmup=1s"],  # as its file: quotaTurbo decides after a few spells
}

# The plots (their titles' beginnings) each report draws, at full length as shortened: a plot
# that goes missing fails here, not only one that is drawn empty. A new experiment goes here.
LATENCY, OVER_TIME, CPU, TRACE, MEMORY, DISK, NET, THROTTLED, DECISIONS = (
    "Latency percentiles",
    "Mean request latency",
    "CPU share",
    "Trace demand",
    "memory.current",
    "Disk throughput",
    "Bytes sent",
    "CFS bandwidth",
    "Policy decisions",
)
PLOTS = {
    "alibaba_machine": (LATENCY, CPU, TRACE, DECISIONS),
    "blkio_weights": (LATENCY, OVER_TIME, CPU, MEMORY, DISK, DECISIONS),
    "clickhouse_stress": (LATENCY, CPU),
    "clickhouse_regimes": (LATENCY, CPU),
    "clickhouse_tenant": (LATENCY, CPU),
    "fssr_nginx": (LATENCY, OVER_TIME, CPU, MEMORY, DECISIONS),
    "io_bench": (LATENCY, OVER_TIME, CPU, MEMORY, DISK, DECISIONS),
    "koordinator_cpu_curve": (LATENCY, OVER_TIME, CPU, THROTTLED, DECISIONS),
    "memory_bench": (LATENCY, OVER_TIME, CPU, MEMORY),
    "open_loop_96cpu": (LATENCY, CPU),
    "pod_bandwidth": (CPU, NET, DECISIONS),
    "quota_burst": (LATENCY, CPU, THROTTLED, DECISIONS),
    "webserving_spark": (LATENCY, CPU, DECISIONS),
    "probe_clickhouse_stress": (LATENCY, CPU),
    "web_batch": (LATENCY, CPU),
    "autogroup": (CPU,),
    "bistable_nginx": (LATENCY, CPU),
    "memory_host": (LATENCY, OVER_TIME, CPU, MEMORY, DISK),
    "handoff_probe": (LATENCY,),
    "custom_slice": (LATENCY,),
    "duty_beside_postgres": (LATENCY,),
    "cache_qos": (LATENCY, OVER_TIME, CPU, THROTTLED, DECISIONS),
    "tune_koordinator": ("Optimization history", "Trade-off", "Hyperparameter Importances", "Best against the defaults"),
    "tune_fleet": ("Optimization history", "Trade-off", "Hyperparameter Importances", "Best against the defaults", "Per machine"),
    # `colosim fidelity`'s report (not an experiments/*.toml: made below from a suite scored
    # with the simulator standing in for the host)
    "fidelity": ("QPS:", "P50 (s):", "P99 (s):", "offline CPU (share):", "Prediction error", "The batch's share"),
}


@pytest.fixture(scope="module")
def trace_files(tmp_path_factory) -> list[str]:
    """--set overrides that give alibaba_machine.toml its two trace files: machine m_1940 of the
    real v2018 sample where it is beside the project, else a few rows in its layout."""
    d = tmp_path_factory.mktemp("traces")
    syn, machine = d / "synthetic_day.parquet", d / "machine.parquet"
    assert main(["trace", "synthetic", "--seed", "1", "-o", str(syn)]) == 0
    if (SAMPLE / "machine_usage_head100k.csv").exists():
        argv, entity = [str(SAMPLE), "--machine", "m_1940", "--start", "86400s", "--end", "172800s"], "m_1940"
    else:
        argv, entity = [str(alibaba_fixture(d / "v2018")), "--machine", "m_1", "--start", "0s", "--end", "600s"], "m_1"
    assert main(["trace", "alibaba2018", *argv, "-o", str(machine)]) == 0
    return [f"workloads.web.trace.file={syn}", f"workloads.batch.trace.file={machine}", f"workloads.batch.trace.entity={entity}"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> str:
    """A trace set for tune_fleet.toml: two machines of the v2018 sample beside the project,
    else of a few rows in its layout (`colosim trace alibaba2018 --machines`)."""
    d = tmp_path_factory.mktemp("fleet")
    if (SAMPLE / "machine_usage_head100k.csv").exists():
        argv = [str(SAMPLE), "--start", "86400s", "--end", "90000s"]
    else:
        argv = [str(alibaba_fixture(d / "v2018")), "--start", "0s", "--end", "600s"]
    assert main(["trace", "alibaba2018", *argv, "--machines", "2", "--out", str(d / "set")]) == 0
    return str(d / "set")


@pytest.fixture(scope="module")
def report(tmp_path_factory, trace_files, fleet):
    """report(stem) -> (report.html, [(title, traces with points)] its code meant to draw),
    written once per module by the command line."""
    import sim.report
    import sim.tuning.report

    made: dict[str, tuple[Path, list[tuple[str, int]]]] = {}

    def make(stem: str) -> tuple[Path, list[tuple[str, int]]]:
        if stem in made:
            return made[stem]
        out = tmp_path_factory.mktemp(stem)
        sets = SHORT + LONGER.get(stem, []) + (trace_files if stem == "alibaba_machine" else [])
        meant: list = []
        with pytest.MonkeyPatch.context() as mp:
            # what the report's own code meant to draw, beside what it wrote
            if stem.startswith("tune_"):
                write = sim.tuning.report.write_report
                mp.setattr(
                    sim.tuning.report,
                    "write_report",
                    lambda spec, study, *a: meant.append(sim.tuning.report.figures(spec, study)) or write(spec, study, *a),
                )
                # 4 short trials under an SLO they meet: a best to compare with the defaults
                argv = ["tune", str(EXPERIMENTS / f"{stem}.toml"), "--trials", "4", "--seeds", "1", "--slo", "wrk.p99 <= 2 * solo"]
                if stem == "tune_fleet":
                    argv += ["--trace-set", fleet, "--fidelity", "full"]  # 4 whole trials: importances too
                name = "tune_report.html"
            else:
                write = sim.report.write_report
                mp.setattr(sim.report, "write_report", lambda result, path: meant.append(sim.report.figures(result)) or write(result, path))
                argv, name = ["run", str(EXPERIMENTS / f"{stem}.toml")], "report.html"
            assert main([*argv, "--out", str(out), "--no-progress", *(a for s in sets for a in ("--set", s))]) == 0
        assert len(meant) == 1
        made[stem] = (out / name, intended(meant[0]))
        return made[stem]

    return make


@pytest.mark.parametrize("stem", SCENARIOS)
def test_report_loads_and_draws_every_plot(report, stem, tmp_path):
    assert stem in PLOTS, f"experiments/{stem}.toml: say in PLOTS which plots its report draws"
    path, meant = report(stem)
    titles = [t for t, _ in meant]
    assert len(titles) == len(PLOTS[stem]) and all(t.startswith(w) for t, w in zip(titles, PLOTS[stem], strict=True)), titles
    page = load(path, tmp_path)
    assert problems(page, meant) == []


def test_screenshot_of_the_first_plot(report, tmp_path):
    """clickhouse_stress's latency bars as a person sees them: in the first plot's box on the
    screenshot, each run's bars in its own colour, on more than a blank background."""
    from plotly.colors import qualitative

    Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (the test extra: pip install -e '.[test]')")

    path, _ = report("clickhouse_stress")
    box = load(path, tmp_path).plots[0]["box"]
    assert box[1] + box[3] <= WINDOW[1], f"the first plot ({box}) is below the screenshot"
    png = screenshot(path, tmp_path / "clickhouse_stress.png")
    image = Image.open(png).convert("RGB")
    assert image.size == WINDOW
    x, y, w, h = (round(v) for v in box)
    counts = {rgb: n for n, rgb in image.crop((x, y, x + w, y + h)).getcolors(maxcolors=w * h)}
    background = counts.get((255, 255, 255), 0) + counts.get((0xE5, 0xEC, 0xF6), 0)  # paper, plot area
    assert 1 - background / (w * h) > 0.1, "the first plot is (nearly) blank"
    runs = 4  # the report's latency bars: one colour a run, in plotly's palette
    for colour in qualitative.Plotly[:runs]:
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert counts.get(rgb, 0) > 2000, f"the bars in {colour}: {counts.get(rgb, 0)} pixels"


def test_a_broken_report_fails(report, tmp_path):
    """The check sees what a person would: a script that throws, and a plot left empty."""
    path, meant = report("clickhouse_stress")
    broken = tmp_path / "broken.html"
    sabotage = """<script>
window.addEventListener("load", () => {
  const second = document.querySelectorAll(".plotly-graph-div")[1];
  Plotly.react(second, [], second.layout);
  throw new Error("broken on purpose");
});
</script></body>"""
    broken.write_text(re.sub("</body>", lambda _: sabotage, path.read_text(encoding="utf-8")), encoding="utf-8")
    found = problems(load(broken, tmp_path), meant)
    assert any("broken on purpose" in p for p in found), found
    assert any(p.startswith("CPU share") and "0 traces drawn" in p for p in found), found
    assert any(p.startswith("CPU share") and "no trace drew anything" in p for p in found), found
    assert len(found) == 3, found


def test_fidelity_report_loads_and_draws_every_plot(tmp_path):
    from test_fidelity import simulated_suite

    import replay.fidelity_report

    simulated_suite(tmp_path / "suite")
    doc = json.loads((tmp_path / "suite/fidelity.json").read_text())
    meant = intended(replay.fidelity_report.figures(doc))
    titles = [t for t, _ in meant]
    assert len(titles) == len(PLOTS["fidelity"]) and all(t.startswith(w) for t, w in zip(titles, PLOTS["fidelity"], strict=True)), titles
    assert problems(load(tmp_path / "suite/fidelity.html", tmp_path), meant) == []
