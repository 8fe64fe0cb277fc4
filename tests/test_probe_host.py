"""`colosim replay --probe` on this host's real cgroups: what the probe sums from each thread's
/proc/TID/schedstat must agree with what the kernel's cpuacct says of the cgroup, and
threads that outnumber the CPUs must be seen waiting. Skips where replay cannot run."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from host_replay import unavailable

from replay.cgroupfs import detect_layout

REASON = unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")


def replay_probed(tmp_path, scenario, out) -> subprocess.CompletedProcess:
    """`colosim replay SCENARIO --probe --out OUT`, waiting while another replay holds the host."""
    for _ in range(120):
        proc = subprocess.run(
            [sys.executable, "-m", "sim", "replay", str(scenario), "--probe", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if "another replay is running" not in proc.stderr:
            return proc
        time.sleep(5)
    pytest.skip("another replay held the host for 10 minutes")


def test_probe_run_time_matches_cpuacct_and_threads_beyond_the_cpus_wait(tmp_path):
    layout = detect_layout()
    # 4 + 4 hogs (stress-like busy loops of colosim-load) under 1024:512 shares on this host's CPUs
    scenario = tmp_path / "pair.toml"
    scenario.write_text("""
[scenario]
name = "pair"
duration = "6s"
warmup = "1s"
[cgroups.a]
"cpu.shares" = 1024
[cgroups.b]
"cpu.shares" = 512
[workloads.ha]
kind = "hog"
cgroup = "a"
threads = 4
[workloads.hb]
kind = "hog"
cgroup = "b"
threads = 4
""")
    proc = replay_probed(tmp_path, scenario, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out/comparison.json").read_text())["variants"]["pair"]
    probe = doc["probe"]
    a, b = probe["groups"]["a"], probe["groups"]["b"]
    print(
        f"probe: a {a['run_s']:.3f} s (cpuacct {a['cpuacct_s']:.3f}), b {b['run_s']:.3f} s (cpuacct {b['cpuacct_s']:.3f}); cost {probe['cost_cpus']:.4f} CPUs"
    )
    # the threads' own run time, summed, is what cpuacct charged the cgroup (same window)
    assert a["run_s"] == pytest.approx(a["cpuacct_s"], rel=0.05)
    assert b["run_s"] == pytest.approx(b["cpuacct_s"], rel=0.05)
    assert a["run_s"] / b["run_s"] == pytest.approx(a["cpuacct_s"] / b["cpuacct_s"], rel=0.05)
    # 8 always-runnable threads on fewer CPUs: every thread waits, most of the time
    window = probe["window_s"]
    ncpus = probe["ncpus"]
    # colosim-load's 4 hog threads per cgroup, and its own main and timer threads
    assert a["threads"] >= 4 and b["threads"] >= 4
    assert a["wait_s"] + b["wait_s"] > (8 - ncpus) * window * 0.5
    # hogs are switched out involuntarily (preempted), not by sleeping
    assert a["involuntary"] > 0 and b["involuntary"] > 0
    # the comparison carries the probe's figures as the cgroups' own
    assert doc["measured"]["a wait (s/s)"] > 0 and doc["measured"]["b switches/s"] > 0
    # the run's folder is gone from every hierarchy (other replays' folders, on this shared
    # host, are theirs to remove)
    folder = next(p for w in doc["knob_writes"] for p in w["file"].split("/") if p.startswith("colosim-"))
    assert not any((layout.own_dir(key) / folder).exists() for key in layout.keys)


def test_probe_traces_each_wakeup_of_a_service_beside_a_hog(tmp_path):
    """The probe's runqlat (replay/runqlat.py, from the warm-up's end): a built-in open loop of
    200 requests/s wakes its threads at least once a request, so the host's histogram of `ls`
    counts at least that many wakeups over the window, and the comparison carries its rows."""
    from replay.runqlat import available

    if (why := available()) is not None:
        pytest.skip(f"no tracefs here: {why}")
    scenario = tmp_path / "svc.toml"
    scenario.write_text("""
[scenario]
name = "svc"
duration = "6s"
warmup = "1s"
[cgroups.ls]
[cgroups.be]
[workloads.web]
kind = "open_loop"
cgroup = "ls"
rate = 200
workers = 1
service = { dist = "constant", value = "100us" }
[workloads.hog]
kind = "hog"
cgroup = "be"
threads = 2
""")
    proc = replay_probed(tmp_path, scenario, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out/comparison.json").read_text())["variants"]["svc"]
    hist = doc["runqlat"]["host"]["ls"]
    requests = doc["measured"]["QPS"] * 5  # the 5 s after the warm-up
    print(f"ls: {sum(hist)} wakeups traced for {requests:.0f} requests; histogram {hist}")
    assert len(hist) == 24 and sum(hist) >= 0.8 * requests
    assert "be" not in doc["runqlat"]["host"] or sum(doc["runqlat"]["host"]["be"]) < sum(hist)
    held = doc["measured"]["ls wakeups held ≥ 1024 µs (share)"]
    assert 0 <= held <= 1
    assert doc["measured"]["ls wake-to-run P99 (µs)"] >= 1
    # run segments on the host: the hogs never sleep, so their runs end preempted (beside them
    # colosim-load's deadline thread sleeps in 50 ms steps: 20 runs a second end asleep); the
    # service's threads sleep after each 100 µs request, so most of theirs end asleep (a
    # request preempted on its way is the exception). The model's side: test_sched_counters.
    seg = doc["run_segments"]["host"]
    be, ls = seg["be"], seg["ls"]
    print(f"be {sum(be['preempted'])} preempted / {sum(be['blocked'])} blocked; ls {sum(ls['preempted'])} / {sum(ls['blocked'])}")
    assert sum(be["preempted"]) > 1000 and sum(be["blocked"]) <= 1.2 * 20 * 5
    assert sum(ls["blocked"]) >= requests * 0.8 and sum(ls["preempted"]) < sum(ls["blocked"])
    assert doc["measured"]["be runs ended preempted (share)"] >= 0.9
