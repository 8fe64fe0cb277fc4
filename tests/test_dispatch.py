"""A closed loop's pool dispatch (core_rs workload.rs `Pool`), against hand-worked queueing.

Ten clients, no think time, two workers on two CPUs, every request exactly 1 ms of CPU:

* `dispatch = "queue"`: one FIFO served by whichever worker is free — both workers always
  busy, 2 requests a millisecond, so every request's latency is 10 / 2 = 5 ms.
* `dispatch = "connection"`: client c's requests wait for the worker that owns its connection.
  A worker owning k clients serves them in turn, 1 a millisecond, so each of its requests takes
  k ms: the latencies are k ms and (10 - k) ms, half of the completions each (both workers run
  flat out on CPUs of their own) — 5 ms for all at k = 5, and 10 ms for all when one worker
  owns every connection.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim import load_scenario, run_scenario
from sim.errors import ScenarioError

pytest.importorskip("sim._core")


def pool(tmp_path, dispatch: str, seed: int, workers: str = "workers = 2"):
    path = tmp_path / f"pool_{dispatch}_{seed}.toml"
    path.write_text(f"""
[scenario]
name = "pool"
duration = "2s"
warmup = "200ms"
seed = {seed}

[node]
cores_per_socket = 2

[cgroups.svc]

[workloads.web]
kind = "closed_loop"
cgroup = "svc"
clients = 10
{workers}
dispatch = "{dispatch}"
service = {{ dist = "constant", value = "1ms" }}
""")
    result = run_scenario(load_scenario(path), progress=False)
    (run,) = result.runs.values()
    return run.services["web"]


def test_one_queue_serves_every_client_in_turn(tmp_path):
    svc = pool(tmp_path, "queue", seed=1)
    assert svc.completed == pytest.approx(2 * 1800, abs=4)
    assert np.allclose(svc.latencies_s, 5e-3, atol=1e-6)


def test_a_connection_waits_for_its_own_worker(tmp_path):
    splits = set()
    for seed in range(1, 13):
        svc = pool(tmp_path, "connection", seed=seed)
        values, counts = np.unique(np.round(svc.latencies_s * 1e3, 3), return_counts=True)
        if values.tolist() == [5.0]:
            # five connections each: 5 ms, as one queue would
            assert svc.completed == pytest.approx(2 * 1800, abs=4)
            splits.add(5)
            continue
        if len(values) == 1:
            # one worker owns all ten connections: 1 request a millisecond, 10 ms each
            assert values[0] == 10.0, (seed, values)
            assert svc.completed == pytest.approx(1800, abs=2)
            splits.add(0)
            continue
        k, rest = values
        assert k + rest == 10.0 and k < 5, (seed, values)
        # both workers complete one request a millisecond
        assert counts[0] == pytest.approx(counts[1], abs=2), (seed, counts)
        assert svc.completed == pytest.approx(2 * 1800, abs=4)
        splits.add(int(k))
    # the owners are drawn per seed, as the kernel's accept wakes one waiting worker or another:
    # twelve seeds of Binomial(10, 1/2) splits are not all alike
    assert len(splits) >= 3, splits


def test_dispatch_needs_a_pool(tmp_path):
    with pytest.raises(ScenarioError, match=r"workloads\.web.*dispatch.*workers"):
        pool(tmp_path, "connection", seed=1, workers="")


def test_a_streamed_exchange_needs_a_generator_task_per_client(tmp_path):
    # (the client's task runs on into its next part: no pool of generator threads in between)
    with pytest.raises(ScenarioError, match=r"workloads\.web.*exchange.*generator task per client"):
        pool(
            tmp_path,
            "queue",
            seed=1,
            workers='rounds = 2\nexchange = "stream"\nclient_cpu = { dist = "constant", value = "1ms" }\nclient_threads = 2',
        )


def test_an_event_loop_server_answers_a_pass_at_once(tmp_path):
    # One worker, `replies = "pass"` (redis-server's beforeSleep): once every client waits, a
    # pass is all ten requests, served 1 ms each and answered together at its end — 10 ms for
    # every request, as one at a time would give (Little's law), but ten completions at each
    # instant, one every 10 ms, against one a millisecond replying each at once.
    by_pass = pool(tmp_path, "queue", seed=1, workers='workers = 1\nreplies = "pass"')
    each = pool(tmp_path, "queue", seed=1, workers="workers = 1")
    for svc in (by_pass, each):
        assert svc.completed == pytest.approx(1800, abs=10)
        assert np.allclose(svc.latencies_s, 10e-3, atol=1e-6)
    times, counts = np.unique(np.round(by_pass.completions_s * 1e6), return_counts=True)
    assert set(counts[1:-1].tolist()) == {10} and np.allclose(np.diff(times), 10e3)
    assert len(np.unique(np.round(each.completions_s * 1e6))) == each.completed


def test_replies_by_pass_need_a_pool(tmp_path):
    with pytest.raises(ScenarioError, match=r"workloads\.web.*replies.*workers"):
        pool(tmp_path, "queue", seed=1, workers='replies = "pass"')
