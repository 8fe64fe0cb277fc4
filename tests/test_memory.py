"""Memory in scenarios, end to end through the core: a `stress --vm` hog against
memory.limit_in_bytes (OOM), memory.high (throttled, never killed), the node's memory, the
tables and results; bad settings named; a scenario that allocates nothing runs exactly as
without memory."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ScenarioError
from sim.runner import run_scenario
from sim.scenario import Scenario, load_scenario

MI = 2**20

BASE = """
[scenario]
name = "mem"
duration = "2s"
seed = 3

[node]
cores_per_socket = 2
memory = "4Gi"

[cgroups.online]
[cgroups.batch]
"memory.limit_in_bytes" = "300Mi"

[workloads.web]
kind = "closed_loop"
cgroup = "online"
clients = 2
service = "2ms"

[workloads.vm]
kind = "memory_hog"
cgroup = "batch"
threads = 2
bytes = "200Mi"
mode = "keep"
"""


def run(text: str):
    return run_scenario(Scenario.from_toml(text), progress=False).runs["mem"]


def test_a_limit_too_small_for_two_workers_kills_one():
    r = run(BASE)
    m = r.cgroups["batch"].memory
    assert r.oom_kills == {"vm": 1}
    assert m["current"] == 200 * MI and m["current"] <= 300 * MI
    assert m["events_oom_kill"] == 1 and m["events_max"] >= 1
    assert r.node_memory["total"] == 4 * 2**30
    # the survivor holds its memory to the end of the run (time series)
    assert r.timeseries.memory["batch"][-1] == 200 * MI
    assert r.services["web"].completed > 0


def test_memory_high_throttles_and_never_kills():
    r = run(BASE.replace('"memory.limit_in_bytes" = "300Mi"', '"memory.high" = "300Mi"'))
    m = r.cgroups["batch"].memory
    assert r.oom_kills == {} and m["events_oom_kill"] == 0
    assert m["events_high"] > 0
    # 400 MiB wanted, 300 MiB high: the penalty (up to 2 s a chunk) holds them near it
    assert 300 * MI < m["peak"] < 340 * MI


def test_the_table_and_results_show_memory(tmp_path, capsys):
    path = tmp_path / "mem.toml"
    path.write_text(BASE)
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Memory (at the end; events since the start)" in out and "1 killed" in out
    doc = json.loads((tmp_path / "o" / "results.json").read_text())["runs"]["mem"]
    assert doc["oom_kills"] == {"vm": 1} and doc["cgroups"]["batch"]["memory"]["peak"] == 300 * MI


def test_a_scenario_that_allocates_nothing_runs_exactly_as_without_memory(root):
    plain = load_scenario(root / "experiments" / "clickhouse_stress.toml")
    with_memory = load_scenario(root / "experiments" / "clickhouse_stress.toml", ["node.memory=64Gi"])
    a = run_scenario(plain, progress=False)
    b = run_scenario(with_memory, progress=False)
    for name in a.runs:
        ra, rb = a.runs[name], b.runs[name]
        assert (ra.cpu_busy_s == rb.cpu_busy_s).all()
        for svc in ra.services:
            assert (ra.services[svc].latencies_s == rb.services[svc].latencies_s).all()
        assert rb.node_memory is not None and ra.node_memory is None


@pytest.mark.parametrize(
    "change, message",
    [
        ('"memory.limit_in_bytes" = "300Mi"', None),
        ('"memory.limit_in_bytes" = "12Q"', 'cgroups.batch."memory.limit_in_bytes": must be a memory quantity like "16000Mi"'),
        (
            '"memory.limit_in_bytes" = "100Mi"\n"memory.high" = "200Mi"',
            'cgroups.batch."memory.high": must not be above memory.limit_in_bytes',
        ),
        ('"memory.low" = -5', 'cgroups.batch."memory.low"'),
        ('"memory.oom.group" = 2', 'cgroups.batch."memory.oom.group"'),
    ],
)
def test_bad_memory_settings_are_named(change, message):
    text = BASE.replace('"memory.limit_in_bytes" = "300Mi"', change)
    if message is None:
        Scenario.from_toml(text)
        return
    with pytest.raises(ScenarioError) as err:
        Scenario.from_toml(text)
    assert message in str(err.value)


def test_a_memory_workload_needs_the_nodes_memory():
    with pytest.raises(ScenarioError, match=r"workloads.vm.kind: a memory workload needs the node's memory"):
        Scenario.from_toml(BASE.replace('memory = "4Gi"\n', ""))
    with pytest.raises(ScenarioError, match=r'workloads.vm.hang: mode "hang" needs a hang time'):
        Scenario.from_toml(BASE.replace('mode = "keep"', 'mode = "hang"'))


CACHE = """
[scenario]
name = "cache"
duration = "12s"
warmup = "4s"  # the server's cache is warm by then; dd starts then
seed = 1

[node]
cores_per_socket = 4
memory = "1Gi"

[cgroups.online]
[cgroups.batch]

[workloads.web]
kind = "file_server"
cgroup = "online"
clients = 4
service = "200us"
working_set = "512Mi"
file_size = "1Mi"
disk_latency = "1ms"
disk_bandwidth = "1G"  # 2 ms a file: the 512 files are cached within the warm-up

[workloads.dd]
kind = "cache_writer"
cgroup = "batch"
start = "4s"

[[runs]]
name = "alone"
baseline = true
set = { "workloads.dd.enabled" = false }

[[runs]]
name = "with dd"

[[runs]]
name = "with dd under memory.high"
set = { "cgroups.batch" = { "memory.high" = "200Mi" } }

# the same server but cold and larger: 96 files of 8 MiB (768 MiB), each read about every
# 0.5 s — slower than the writer's stream turns the inactive list over. Its files went active
# in the warm-up; the writer's stream keeps the node's inactive list low against them
# (inactive_is_low, ratio 1 under 1 GiB), so they are deactivated until inactive ≈ active
# and then evicted: what stays active is about half the node, short of the set
[[runs]]
name = "cold alone"
set = { "workloads.dd.enabled" = false, "workloads.web.file_size" = "8Mi", "workloads.web.working_set" = "768Mi", "workloads.web.think" = "20ms" }

[[runs]]
name = "cold with dd"
set = { "workloads.web.file_size" = "8Mi", "workloads.web.working_set" = "768Mi", "workloads.web.think" = "20ms" }

[[runs]]
name = "cold with dd under memory.high"
set = { "workloads.web.file_size" = "8Mi", "workloads.web.working_set" = "768Mi", "workloads.web.think" = "20ms", "cgroups.batch" = { "memory.high" = "200Mi" } }
"""


def test_a_cache_writer_squeezes_a_cold_file_servers_cache_unless_held_back():
    result = run_scenario(Scenario.from_toml(CACHE), progress=False)
    cache = {n: r.cgroups["online"].memory["file"] for n, r in result.runs.items()}
    # hot: every file is read ~40 times a second, so it is on the active list and a writer
    # that touches each of its pages once takes none of it (mm/vmscan.c's two-list LRU)
    # (the root's lists balance — inactive_is_low — so hot pages are deactivated now and
    # then; one not read again before it reaches the inactive tail goes)
    assert cache["alone"] == cache["with dd under memory.high"] == 512 * MI
    assert cache["with dd"] >= 0.95 * 512 * MI
    web = {n.removeprefix("cold "): r.services["web"].mean_s for n, r in result.runs.items() if n.startswith("cold")}
    cache = {n.removeprefix("cold "): c for n, c in cache.items() if n.startswith("cold")}
    alone, free, held = (result.runs["cold " + n] for n in ("alone", "with dd", "with dd under memory.high"))
    assert cache["alone"] == cache["with dd under memory.high"] == 768 * MI
    assert cache["with dd"] < 600 * MI
    # a miss reads 8 MiB (9 ms) where a hit takes 0.2 ms
    assert web["with dd"] > 10 * web["alone"]
    # every request hits; what is left is the writer's share of the CPUs (four clients and
    # one dd thread on four CPUs: 5/4 of the time)
    assert held.services["web"].p50_s == alone.services["web"].p50_s
    assert web["with dd under memory.high"] < 1.4 * web["alone"]
    assert held.cgroups["batch"].memory["file"] <= 200 * MI and free.cgroups["batch"].memory["file"] > 200 * MI
    assert alone.timeseries.memory["online"][-1] == 768 * MI


def test_an_analytics_job_slows_when_its_set_does_not_fit():
    text = """
[scenario]
name = "spark"
duration = "5s"
warmup = "1s"

[node]
cores_per_socket = 2
memory = "4Gi"
swap = "2Gi"

[cgroups.spark]

[workloads.als]
kind = "analytics"
cgroup = "spark"
working_set = "400Mi"
work = "10ms"

[[runs]]
name = "fits"

[[runs]]
name = "300Mi limit"
set = { "cgroups.spark" = { "memory.limit_in_bytes" = "300Mi" } }
"""
    r = run_scenario(Scenario.from_toml(text), progress=False)
    fits, squeezed = r.runs["fits"].services["als"], r.runs["300Mi limit"].services["als"]
    # a quarter of the set in swap: each task 1 + 20 × 1/4 = 6× longer, a sixth of the tasks
    assert fits.mean_s == pytest.approx(0.010) and squeezed.mean_s == pytest.approx(0.060)
    assert r.runs["300Mi limit"].cgroups["spark"].memory["swap"] == 100 * MI
