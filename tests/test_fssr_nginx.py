"""experiments/fssr_nginx.toml (seed 001, case 3) shows what the seed shows: without FSSR
the offline job's memory keeps nginx's page cache small and its download time high; with
rubik's FSSR nginx's cache grows as when it runs alone and its download time stays near
the solo run's."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from sim.runner import run_scenario
from sim.scenario import load_scenario

MI = 2**20


@pytest.fixture(scope="module")
def result(root):
    return run_scenario(load_scenario(root / "experiments" / "fssr_nginx.toml"), progress=False)


def test_fssr_keeps_nginx_near_its_solo_run(result):
    plain, fssr, alone = (result.runs[n] for n in ("colocated, no FSSR", "colocated, FSSR", "nginx alone"))
    mean = {n: r.services["nginx"].mean_s for n, r in result.runs.items()}
    assert mean["colocated, FSSR"] < 1.1 * mean["nginx alone"]
    # the seed: "significantly" better with FSSR (no figure given). With reclaim by the page
    # (32-page rounds, lists scanned size >> priority) nginx keeps 2.5 of its 4 GiB without
    # FSSR, ~4.7x FSSR's download time (whole-file reclaim kept 0.8 GiB, ~18x)
    assert mean["colocated, no FSSR"] > 3 * mean["colocated, FSSR"]
    # nginx's memory: with FSSR as alone (the 4000 MiB working set), without it far less
    assert fssr.cgroups["online"].memory["current"] == alone.cgroups["online"].memory["current"] == 4000 * MI
    assert plain.cgroups["online"].memory["current"] < 0.8 * 4000 * MI


def test_download_time_over_the_run(result):
    """The seed's left figure: as downloads go on, without FSSR the download time stays high
    while with FSSR it falls to the solo run's once the cache is warm."""

    def late_mean(run):
        s = run.services["nginx"]
        late = s.completions_s > run.duration_s * 2 / 3
        return float(np.mean(s.latencies_s[late]))

    plain, fssr, alone = (result.runs[n] for n in ("colocated, no FSSR", "colocated, FSSR", "nginx alone"))
    assert late_mean(fssr) < 1.2 * late_mean(alone)
    assert late_mean(plain) > 20 * late_mean(fssr)
    # and the offline memory.high went down in steps of 10% of the node from 80%
    highs = [
        d["writes"][0]["value"]
        for d in fssr.decisions
        if "dynMemory fssr" in d["what"] and d["writes"] and d["writes"][0]["knob"] == "memory.high"
    ]
    total = 8 * 2**30
    assert highs[0] == total * 8 // 10
    assert all(a - b == total // 10 for a, b in pairwise(highs))
    assert len(highs) >= 3
