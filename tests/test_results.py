"""Results, the table, results.json and the report, on the fake core (no Rust needed)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sim import ExperimentResult, RunResult, load_scenario, run_scenario
from sim.report import write_report
from sim.results import nearest_rank, sig3


def test_nearest_rank_percentiles():
    values = np.arange(1, 101, dtype=float)  # 1..100
    assert nearest_rank(values, 50) == 50
    assert nearest_rank(values, 90) == 90
    assert nearest_rank(values, 99) == 99
    assert nearest_rank(values, 99.9) == 100
    assert nearest_rank(np.arange(1, 1001, dtype=float), 99.9) == 999  # no float round-up
    assert nearest_rank(np.array([7.0]), 50) == 7
    assert math.isnan(nearest_rank(np.array([]), 50))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.4849, "0.485"),
        (1.885, "1.89"),
        (0.5, "0.500"),
        (5000, "5000"),
        (0.000123, "0.000123"),
        (0, "0"),
        (math.nan, "-"),
        (12.34, "12.3"),
    ],
)
def test_three_significant_digits(value, text):
    assert sig3(value) == text


@pytest.fixture
def experiment(fake_core, root) -> ExperimentResult:
    scenario = load_scenario(root / "experiments" / "clickhouse_stress.toml", ["scenario.duration=30s"])
    return run_scenario(scenario, progress=False)


def test_every_run_is_collected_in_order(experiment, fake_core):
    assert list(experiment.runs) == [
        "ClickHouse (baseline)",
        "ClickHouse + stress (no isolation)",
        "ClickHouse + stress (offline cpu.qos_level=-1)",
        "ClickHouse + stress (offline cpu.idle=1)",
    ]
    assert experiment.baseline == "ClickHouse (baseline)"
    assert len(fake_core) == 4
    for node in fake_core:
        assert node.now() == 30_000_000_000  # each run ends exactly at the duration
        assert node._reset_at == 2_000_000_000  # and its stats were reset at the warm-up
    assert fake_core[2].spec["cgroups"][1]["cpu.qos_level"] == -1


def test_run_result(experiment):
    run: RunResult = experiment.runs["ClickHouse + stress (no isolation)"]
    assert (run.duration_s, run.warmup_s, run.measured_s, run.ncpus) == (30.0, 2.0, 28.0, 8)
    svc = run.services["clickhouse"]
    # the fake completes one request every 50 ms: 28 s measured -> 560
    assert svc.completed == 560 and svc.started == 561
    assert svc.qps == pytest.approx(20.0)
    assert svc.latencies_s.dtype == np.float64 and len(svc.latencies_s) == 560
    assert svc.completions_s[0] == pytest.approx(2.05)
    assert svc.p50_s == pytest.approx(0.047)  # latencies cycle 1..100 ms
    assert svc.p999_s == pytest.approx(0.100)
    online, offline = run.cgroups["online"], run.cgroups["offline"]
    assert online.cpu_s + offline.cpu_s == pytest.approx(8 * 28.0)
    assert online.cpu_share + offline.cpu_share == pytest.approx(1.0)
    assert run.cpu_busy_s.shape == (8, 3)
    assert run.busy_share == pytest.approx(1.0)
    assert set(run.cpus()[0]) == {"online", "offline"}


def test_time_series(experiment):
    ts = experiment.runs["ClickHouse + stress (no isolation)"].timeseries
    assert len(ts.t_s) == 300 and ts.t_s[0] == pytest.approx(0.1) and ts.t_s[-1] == pytest.approx(30)
    total = ts.cpu_share["online"] + ts.cpu_share["offline"]
    assert np.allclose(total, 1.0)
    assert ts.completions["clickhouse"].sum() == 600  # whole run, warm-up included


def test_table_shows_change_against_the_baseline(experiment):
    table = experiment.table()
    lines = table.splitlines()
    assert "QPS" in lines[1] and "P50" in lines[1] and "P99" in lines[1]
    baseline = next(line for line in lines if line.startswith("| ClickHouse (baseline)"))
    assert "%" not in baseline
    colocated = next(line for line in lines if "(no isolation)" in line)
    assert "20.0 (+0.0%)" in colocated
    cpu = experiment.cpu_table()
    assert "online" in cpu and "offline" in cpu and "node busy" in cpu


def test_results_json_document(experiment):
    doc = json.loads(experiment.to_json())
    assert doc["scenario"] == "clickhouse_stress"
    assert (doc["seed"], doc["duration_s"], doc["warmup_s"]) == (1, 30.0, 2.0)
    assert doc["baseline"] == "ClickHouse (baseline)"
    assert list(doc["runs"]) == list(experiment.runs)
    run = doc["runs"]["ClickHouse + stress (no isolation)"]
    assert set(run["services"]["clickhouse"]) == {
        "qps",
        "p50_s",
        "p90_s",
        "p99_s",
        "p999_s",
        "mean_s",
        "started",
        "completed",
        "dropped",
    }
    assert set(run["cgroups"]["offline"]) == {
        "cpu_s",
        "cpu_share",
        "wait_s",
        "nr_migrations",
        "nr_switches",
        "nr_periods",
        "nr_throttled",
        "throttled_s",
        "nr_bursts",
        "burst_s",
        "psi_some_s",
        "psi_full_s",
        "memory",  # null: the fake models no memory
        "io",  # null: nor a disk
        "net_tx_bytes",  # null: nor a link
        "runqlat_us",  # all zero: the fake schedules no wakeups
        "segments_us",  # all zero: nor any switch
        "runnable_us",  # all zero: nor a queue
    }
    assert run["cgroups"]["offline"]["runqlat_us"] == [0] * 24
    assert run["cgroups"]["offline"]["memory"] is None
    assert run["cgroups"]["offline"]["io"] is None and run["cgroups"]["offline"]["net_tx_bytes"] is None
    assert len(run["cpus"]) == 8


def test_no_completions_is_null_not_nan(fake_core, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        '[scenario]\nname = "quiet"\nduration = "0.01s"\n[cgroups.a]\n'
        '[workloads.w]\nkind = "closed_loop"\ncgroup = "a"\nclients = 1\nservice = "1s"\n'
    )
    result = run_scenario(load_scenario(path), progress=False)
    doc = json.loads(result.to_json())
    assert doc["runs"]["quiet"]["services"]["w"]["p50_s"] is None
    assert "-" in result.table()


def test_report_is_self_contained_html(experiment, tmp_path):
    path = write_report(experiment, tmp_path / "report.html")
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<script src=" not in text  # plotly.js is inline: the file opens offline
    assert "Latency percentiles" in text and "CPU share" in text
    assert "ClickHouse + stress (offline cpu.idle=1)" in text
