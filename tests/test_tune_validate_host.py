"""`colosim tune --validate`: the default and the best configuration replayed on this host's
real cgroups, each beside the simulator's prediction.  Needs what replay needs (root, a
writable cgroup hierarchy, colosim-load); skips elsewhere with the reason."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_replay_host import REASON

pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")

SCENARIO = """
[scenario]
name = "validate_small"
duration = "3s"
warmup = "500ms"
seed = 1

[cgroups.online]
"cpu.shares" = 1024
[cgroups.be]
"cpu.shares" = 2

[workloads.web]
kind = "closed_loop"
cgroup = "online"
clients = 1
service = { dist = "exponential", mean = "5ms" }

[workloads.batch]
kind = "hog"
cgroup = "be"
threads = 2

[policy]
name = "koordinator"
besteffort = "be"
ls = ["online"]

[tune]
params = { cpu_suppress_threshold_percent = [30, 100] }
slo = ["web.p99 <= 2 * solo"]
trials = 4
"""


def test_validate_replays_default_and_best(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "sim", "tune", str(path), "--out", str(out), "--no-progress", "--validate"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout[proc.stdout.index("predicted (simulator, calibrated on this host) vs measured") :]
    for config in ("default", "best"):
        assert f"| {config} " in table
        doc = json.loads((out / "validate" / config / "comparison.json").read_text())
        (v,) = doc["variants"].values()
        # the host really ran it: the service completed requests, the policy wrote its cpuset
        assert v["measured"]["QPS"] > 10 and v["predicted"]["QPS"] > 10
        assert any(w["file"].endswith("cpuset.cpus") for w in v["knob_writes"])
    best = (out / "tuned_policy.toml").read_text()
    threshold = int(best.split("cpu_suppress_threshold_percent = ")[1].split()[0])
    writes = json.loads((out / "validate" / "best" / "comparison.json").read_text())
    assert threshold >= 30 and writes["variants"]
