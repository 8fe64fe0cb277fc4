"""The core's results are bit-identical to the golden runs recorded before the speed work
(issue 21: a faster core without changing results). The golden file was written by
tests/data/make_golden.py from the core as it was before any optimisation; every run's
digest covers all a user reads (latencies, completions, cgroup counters, per-CPU busy time,
time series, memory, IO). When the model itself changes, regenerate it with that script."""

from __future__ import annotations

import json

import pytest

from tests.data import make_golden

RECORDED = json.loads(make_golden.GOLDEN.read_text())


@pytest.mark.parametrize("case", sorted(make_golden.CASES))
def test_results_identical_to_golden(case: str) -> None:
    assert case in RECORDED, f"{case}: no golden record; run tests/data/make_golden.py"
    assert make_golden.compute([case])[case] == RECORDED[case]


def test_digest_sees_a_different_run() -> None:
    """The comparison can fail: the same case at another seed digests differently, run by run
    (so the digests cover the random draws, not only configuration)."""
    other = make_golden.compute(["memory_bench"], seed_offset=1)["memory_bench"]
    for run, digest in other.items():
        assert digest["sha256"] != RECORDED["memory_bench"][run]["sha256"], run
