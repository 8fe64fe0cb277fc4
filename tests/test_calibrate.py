"""`colosim calibrate`'s simulator side, no host needed: the burst spell's dependence on the
CFS period timer's phase (hand-worked) and the seed drawing that phase."""

from __future__ import annotations

import numpy as np
import pytest

from replay.calibrate import micro_scenario, micro_scenarios
from sim.runner import run_variant
from sim.scenario import Variant

TOPOLOGY = {"node.sockets": 1, "node.cores_per_socket": 2, "node.threads_per_core": 1, "kernel.scheduler": "eevdf"}


def burst_micro():
    return next(m for m in micro_scenarios(2) if "cpu.cfs_burst_us" in m.name)


def spells(seed: int, phase_ns: int | None = None):
    m = burst_micro()
    r = run_variant(Variant(m.name, True, micro_scenario(m, 6, TOPOLOGY, phase_ns)), seed)
    return r, r.services["b"].latencies_s


@pytest.mark.parametrize(
    ("phase_ms", "spell_s"),
    [
        # 4 threads x 80 ms on 2 CPUs, pool quota + burst = 200 ms full at each spell (one a
        # second), refill 100 ms capped at 200; d = time from the spell's start to the next
        # boundary (spells start on whole seconds, so d = phase, or a period at phase 0):
        (30, 0.160),  # 60 by the boundary, pool topped back to 200, refilled again at 130: no throttle
        (70, 0.180),  # 140 by the boundary, 160 of pool left, dry at 150, throttled to 170, + 10 ms
        (0, 0.210),  # 200 by 100 ms, the refill's 100 dry at 150, throttled to 200, + 10 ms
    ],
)
def test_the_burst_spell_follows_the_period_phase(phase_ms, spell_s):
    _, lat = spells(1, phase_ms * 1_000_000)
    assert len(lat) >= 4
    # HZ 250: the throttle lands up to a 4 ms tick after the pool runs dry
    assert np.all(np.abs(lat - spell_s) <= 0.005), lat


def test_the_seed_draws_the_phase_deterministically():
    r1, a = spells(3)
    _, b = spells(3)
    assert np.array_equal(a, b) and r1.cgroups["s"].nr_throttled == spells(3)[0].cgroups["s"].nr_throttled
    p50s = {round(float(np.median(spells(seed)[1])), 3) for seed in range(1, 9)}
    # 8 seeds, 8 phases: different spells (a phase 10..50 ms before the boundary always gives
    # 0.160, so not 8 different ones), all within what the phase allows
    assert len(p50s) >= 2, p50s
    assert all(0.160 - 0.005 <= p <= 0.210 + 0.005 for p in p50s), p50s
