"""`colosim run` end to end, in-process, on the fake core (no Rust needed)."""

from __future__ import annotations

import json

import pytest

import sim.environment
from sim.cli import main


def run_experiment(root, out) -> int:
    """`colosim run experiments/clickhouse_stress.toml --out OUT --no-progress`."""
    return main(["run", str(root / "experiments" / "clickhouse_stress.toml"), "--out", str(out), "--no-progress"])


def test_run_writes_results_and_report(fake_core, root, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "run",
            str(root / "experiments" / "clickhouse_stress.toml"),
            "--out",
            str(out),
            "--no-progress",
            "--seed",
            "7",
            "--set",
            "workloads.stress.threads=3",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "ClickHouse (baseline)" in printed and "CPU share" in printed
    assert str(out / "results.json") in printed
    doc = json.loads((out / "results.json").read_text())
    assert doc["seed"] == 7
    report = (out / "report.html").read_text()  # as a person sees it: test_report_browser.py
    assert report.count('class="plotly-graph-div"') == 2 and "ClickHouse + stress (offline cpu.idle=1)" in report
    assert all(node.spec["seed"] == 7 for node in fake_core)
    assert fake_core[1].spec["workloads"][1]["threads"] == 3


def test_default_out_dir_is_named_after_the_scenario(fake_core, root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(root / "experiments" / "clickhouse_stress.toml"), "--no-progress"]) == 0
    assert (tmp_path / "out" / "clickhouse_stress" / "results.json").exists()


@pytest.mark.parametrize("error", [ValueError("workloads[0].fanout: too big"), KeyError('no cgroup named "x"')])
def test_core_errors_are_one_line(root, tmp_path, monkeypatch, capsys, error):
    def refuse(spec_json):
        raise error

    monkeypatch.setattr(sim.environment, "_core_node", refuse)
    monkeypatch.delenv("COLOSIM_DEBUG", raising=False)
    code = run_experiment(root, tmp_path)
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith('colosim: error: run "ClickHouse (baseline)": ')
    assert error.args[0] in err


def test_missing_core_says_how_to_build_it(root, tmp_path, monkeypatch, capsys):
    def missing(spec_json):
        raise sim.environment.CoreNotBuilt("the simulator core sim._core is not built")

    monkeypatch.setattr(sim.environment, "_core_node", missing)
    code = run_experiment(root, tmp_path)
    assert code == 1
    assert "not built" in capsys.readouterr().err


def test_progress_label_names_the_scenario_once():
    from sim.runner import progress_label

    assert progress_label("x", "x") == "x"
    assert progress_label("x", "baseline") == "x: baseline"
