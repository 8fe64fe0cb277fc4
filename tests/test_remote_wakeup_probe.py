"""replay/remote_wakeup.py: the costs as differences from the same exchange on one CPU
(arithmetic), and the probe on this host (what it promises: every wakeup counted, its
processes gone, this process's CPUs as they were, a table the scenario takes)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import replace

import pytest
from host_replay import children

from replay.remote_wakeup import RemoteWakeupCost, measure
from sim.scenario.node import RemoteWakeup

COST = RemoteWakeupCost((0, 1), 100, 2.0, 2.5, 15.0, 10.5, 15.5, 20.0)


def test_the_costs_are_the_differences_from_one_cpu():
    assert COST.waker_cost_us == pytest.approx(13.0) and COST.wakee_cost_us == pytest.approx(8.0)
    # a remote exchange measured cheaper than a local one is noise: no cost, never a negative one
    assert replace(COST, waker_us=1.0).waker_cost_us == 0.0
    table = tomllib.loads(COST.toml())["node"]["remote_wakeup"]
    assert table == {"wakee": "8000ns", "waker": "13000ns"}
    assert RemoteWakeup.model_validate(table).core_spec() == {"wakee_ns": 8000, "waker_ns": 13000}
    assert "WARNING" not in COST.summary() and "WARNING" in replace(COST, others_busy_cpus=1.0).summary()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_the_probe_counts_every_wakeup_and_leaves_nothing_behind():
    before = os.sched_getaffinity(0)
    kids = children(os.getpid())  # other tests' servers may still run
    m = measure(wakeups=300)
    assert os.sched_getaffinity(0) == before
    assert children(os.getpid()) == kids  # every child of the probe killed and reaped (zombies included)
    assert m.wakeups == 300
    # every write and every wakeup took some CPU, on one CPU or two
    for v in (m.local_waker_us, m.local_wakee_us, m.waker_us, m.wakee_us, m.busy_waker_us, m.busy_wakee_us):
        assert v > 0
    RemoteWakeup.model_validate(tomllib.loads(m.toml())["node"]["remote_wakeup"])
