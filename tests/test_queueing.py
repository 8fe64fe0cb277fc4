"""Queueing sanity: the simulated node against closed-form queueing theory.

With exponential service and Poisson arrivals, a one-CPU open-loop service is M/M/1
(mean sojourn 1 / (mu - lambda)); c workers on c CPUs are M/M/c, whose mean wait is given
by the Erlang C formula. These hold only if the scheduler neither idles a CPU while work
waits nor charges anything beyond the service time — both properties of the core.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from sim import load_scenario, run_scenario

pytest.importorskip("sim._core")


def open_loop_scenario(tmp_path, cpus: int, rate: float, workers: int, mean_ms: float, seconds: int):
    result = run_scenario(load_scenario(write_open_loop(tmp_path, cpus, rate, workers, mean_ms, seconds)), progress=False)
    (run,) = result.runs.values()
    return run.services["web"]


def write_open_loop(tmp_path, cpus: int, rate: float, workers: int, mean_ms: float, seconds: int, extra: str = ""):
    text = f"""
[scenario]
name = "mmc"
duration = "{seconds}s"
warmup = "5s"
seed = 7

[node]
cores_per_socket = {cpus}

[cgroups.svc]

[workloads.web]
kind = "open_loop"
cgroup = "svc"
rate = {rate}
workers = {workers}
service = {{ dist = "exponential", mean = "{mean_ms}ms" }}
{extra}"""
    path = tmp_path / "mmc.toml"
    path.write_text(text)
    return path


def erlang_c_mean_sojourn(c: int, lam: float, mu: float) -> float:
    """Mean time in system of M/M/c: Erlang C probability of waiting over (c*mu - lambda)."""
    a = lam / mu
    rho = a / c
    # Erlang C from the Poisson distribution: P(wait) = B / (1 - rho + rho*B), with B the
    # Erlang B blocking probability pmf(c; a) / cdf(c; a).
    erlang_b = stats.poisson.pmf(c, a) / stats.poisson.cdf(c, a)
    p_wait = erlang_b / (1 - rho + rho * erlang_b)
    return p_wait / (c * mu - lam) + 1 / mu


def test_mm1_mean_latency(tmp_path):
    lam, mu = 700.0, 1000.0
    svc = open_loop_scenario(tmp_path, cpus=1, rate=lam, workers=1, mean_ms=1.0, seconds=300)
    expected = 1 / (mu - lam)
    assert svc.mean_s == pytest.approx(expected, rel=0.05)
    assert svc.completed > 150_000


def test_mmc_mean_latency_matches_erlang_c(tmp_path):
    c, lam, mu = 4, 3000.0, 1000.0  # rho = 0.75
    svc = open_loop_scenario(tmp_path, cpus=c, rate=lam, workers=c, mean_ms=1.0, seconds=200)
    expected = erlang_c_mean_sojourn(c, lam, mu)
    # Sanity of the formula itself against a hand-worked value (c=4, a=3: C = 0.5094).
    assert erlang_c_mean_sojourn(4, 3.0, 1.0) == pytest.approx(1 + 0.5094 / 1.0, rel=1e-3)
    assert svc.mean_s == pytest.approx(expected, rel=0.05)


def test_mm1_latency_distribution_is_exponential(tmp_path):
    # M/M/1 FIFO sojourn time is exponential with rate mu - lambda: check P50 and P99.
    lam, mu = 500.0, 1000.0
    svc = open_loop_scenario(tmp_path, cpus=1, rate=lam, workers=1, mean_ms=1.0, seconds=200)
    rate = mu - lam
    assert svc.p50_s == pytest.approx(math.log(2) / rate, rel=0.05)
    assert svc.p99_s == pytest.approx(math.log(100) / rate, rel=0.08)
    assert np.all(np.diff(svc.completions_s) >= 0)


def test_an_overloaded_open_loop_drops_what_its_backlog_cannot_hold(tmp_path):
    """λ = 2,000/s against μ = 2 workers / 2 ms = 1,000/s, backlog 200, 20 s measured after a
    5 s warm-up (the backlog is full by then): completed ≈ μT = 20,000 and dropped ≈ (λ − μ)T
    = 20,000; the table shows the drops."""
    path = write_open_loop(tmp_path, cpus=4, rate=2000, workers=2, mean_ms=2, seconds=25, extra="backlog = 200")
    result = run_scenario(load_scenario(path), progress=False)
    web = result.runs["mmc"].services["web"]
    assert web.completed == pytest.approx(20_000, rel=0.03)
    assert web.dropped == pytest.approx(20_000, rel=0.05)
    # every request that got in waited behind a full backlog: ≈ 200 / μ = 0.2 s
    assert web.p50_s == pytest.approx(0.2, rel=0.1)
    assert json.loads(result.to_json())["runs"]["mmc"]["services"]["web"]["dropped"] == web.dropped
    assert "dropped" in result.table() and str(web.dropped) in result.table()


def test_no_dropped_column_when_nothing_drops(tmp_path):
    path = write_open_loop(tmp_path, cpus=4, rate=200, workers=2, mean_ms=2, seconds=6)
    result = run_scenario(load_scenario(path), progress=False)
    assert result.runs["mmc"].services["web"].dropped == 0
    assert "dropped" not in result.table()
