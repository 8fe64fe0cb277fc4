"""Replay on this host's real cgroups: root and a writable cgroup hierarchy with the cpu
controller are needed, and colosim-load built (make setup builds it). Elsewhere these tests
skip with the reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from host_replay import assert_clean, load_processes, parent_state, unavailable

from replay.cgroupfs import detect_layout, leftover_folders
from sim.errors import HostError


def _host_reason() -> str | None:
    from replay.workloads import load_command

    try:
        load_command()
    except HostError as err:
        return str(err)
    return None


REASON = unavailable() or _host_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")

COLOSIM = [sys.executable, "-m", "sim"]


def hog_scenario(tmp: Path, seconds: int = 4, extra: str = "", hog_b: str = "") -> Path:
    path = tmp / "pair.toml"
    path.write_text(f"""
[scenario]
name = "pair"
duration = "{seconds}s"
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
{hog_b}
{extra}
""")
    return path


@pytest.fixture
def layout():
    layout = detect_layout()
    assert leftover_folders(layout) == [], "a leftover run folder from an earlier run: colosim replay --cleanup"
    return layout


def test_hog_pair_under_shares_1024_512_splits_2_to_1_and_leaves_nothing(tmp_path, layout):
    before = parent_state(layout)
    # 10%, as the other host checks: on this shared 2-CPU VM a 7 s window has measured 2.13
    # under other tenants' load (1:1 or 4:1 would still fail). A window the other tenants
    # squeezed (the pair once had 0.49 of the node, and 1.75:1 — the groups' per-CPU shares
    # follow where their hogs happen to run) is taken again, up to 3 times.
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        proc = subprocess.run(
            [*COLOSIM, "replay", str(hog_scenario(tmp_path, 7)), "--out", str(out)], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        measured = json.loads((out / "comparison.json").read_text())["variants"]["pair"]["measured"]
        ratio = measured["a CPU (share)"] / measured["b CPU (share)"]
        got = measured["a CPU (share)"] + measured["b CPU (share)"]
        print(f"attempt {attempt}: a/b = {ratio:.3f}; the pair had {got:.2f} of the node")
        if ratio == pytest.approx(2.0, rel=0.10):
            break
    assert ratio == pytest.approx(2.0, rel=0.10)
    # What the node gave the pair depends on what else runs on this shared machine; that
    # the pair ran at all is what is promised (8 hogs: nowhere near starved even beside others).
    assert got > 0.2
    assert_clean(layout, before)


def test_knob_writes_are_recorded_and_only_inside_the_run_folder(tmp_path, layout):
    # b alone, 4 hogs under a quota of half a CPU: b asks for 2 CPUs, so the quota binds
    # unless this shared machine leaves the run less than half a CPU; then the window is
    # taken again (up to 3 times), since a cap that never bound says nothing
    extra = '[[runs]]\nname = "quota"\nset = { \'cgroups.b."cpu.cfs_quota_us"\' = 50000, "workloads.ha.enabled" = false }\n'
    ncpus = len(os.sched_getaffinity(0))
    for attempt in range(3):
        out = tmp_path / f"o{attempt}"
        proc = subprocess.run(
            [*COLOSIM, "replay", str(hog_scenario(tmp_path, 3, extra)), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        doc = json.loads((out / "comparison.json").read_text())["variants"]["quota"]
        files = [w["file"] for w in doc["knob_writes"]]
        assert any(f.endswith("/b/cpu.cfs_quota_us") for f in files)
        assert all("/colosim-" in f for f in files)
        got = doc["measured"]["b CPU (share)"] * ncpus
        throttled = doc["measured"].get("b nr_throttled", 0)
        print(f"b used {got:.3f} CPUs under a 0.5-CPU quota, throttled {throttled:.0f} times")
        assert got <= 0.5 * 1.05  # the cap holds however busy the machine is
        if got >= 0.45:  # the quota bound: the kernel must have throttled b to hold it there
            assert throttled > 0
            break


def test_an_exception_inside_a_policy_cleans_up(tmp_path, layout, monkeypatch):
    import policies
    from policies.policy import Policy
    from replay.compare import replay

    class Boom(Policy):
        name = "boom"
        interval = 0.5

        def tick(self, obs):
            raise RuntimeError("policy bug")

    monkeypatch.setitem(policies.POLICIES, "boom", Boom)
    before = parent_state(layout)
    path = hog_scenario(tmp_path, 5, '[policy]\nname = "boom"\n')
    with pytest.raises(RuntimeError, match="policy bug"):
        replay(path, [], None, None, compare=False, dry_run=False, say=lambda m: None)
    assert_clean(layout, before)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_run_kills_the_workloads_and_removes_the_cgroups(tmp_path, layout, sig):
    before = parent_state(layout)
    proc = subprocess.Popen(
        [*COLOSIM, "replay", str(hog_scenario(tmp_path, 60))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    while not load_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert load_processes(), "the replay never started its workloads"
    assert leftover_folders(layout), "the run folder should exist while it runs"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert_clean(layout, before)


def test_an_unknown_workload_binary_is_one_clear_error_before_anything_starts(tmp_path, layout):
    before = parent_state(layout)
    path = hog_scenario(tmp_path, hog_b='host = { program = "command", command = ["no-such-hog-xyz"] }')
    proc = subprocess.run([*COLOSIM, "replay", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "colosim: error: workloads.hb.host.command: program 'no-such-hog-xyz' not found on this host"
    assert_clean(layout, before)


def test_a_second_replay_while_one_runs_is_refused(tmp_path, layout):
    from replay.session import Session

    before = parent_state(layout)
    with Session(log=lambda m: None):
        proc = subprocess.run([*COLOSIM, "replay", str(hog_scenario(tmp_path))], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        assert "another replay is running" in proc.stderr and "Traceback" not in proc.stderr
        assert len(leftover_folders(layout)) == len(layout.keys)  # only the first one's
    assert_clean(layout, before)


def test_dry_run_prints_every_write_and_creates_nothing(tmp_path, layout):
    before = parent_state(layout)
    extra = '[[runs]]\nname = "idle"\nset = { \'cgroups.b."cpu.idle"\' = 1 }\n'
    proc = subprocess.run(
        [*COLOSIM, "replay", str(hog_scenario(tmp_path, 2, extra)), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "/b/cpu.shares" in proc.stdout and "'512'" in proc.stdout
    assert "/b/cpu.idle" in proc.stdout
    assert "would run in a:" in proc.stderr
    assert_clean(layout, before)


def test_cleanup_removes_what_a_crashed_run_left(tmp_path, layout):
    before = parent_state(layout)
    folders = _crashed_folder(layout, "colosim-crashed")
    sleeper = subprocess.Popen(["sleep", "600"])
    for d in folders:
        (d / "cgroup.procs").write_text(str(sleeper.pid))
    proc = subprocess.run([*COLOSIM, "replay", "--cleanup"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "removed" in proc.stderr
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
    assert_clean(layout, before)


def _crashed_folder(layout, name: str) -> list[Path]:
    """A run folder `name` with one child x in every hierarchy, as a replay killed mid-run
    leaves it (a v1 cpuset given cpus and mems, which a cgroup needs before a task joins)."""
    folders = []
    for key in layout.keys:
        d = layout.own_dir(key) / name / "x"
        d.mkdir(parents=True)
        folders.append(d)
    if layout.version == 1:
        for f in ("cpuset.cpus", "cpuset.mems"):
            text = (layout.own_dir("cpuset") / f).read_text().strip()
            for d in (layout.own_dir("cpuset") / name, layout.own_dir("cpuset") / name / "x"):
                (d / f).write_text(text)
    return folders


@pytest.mark.skipif(not Path("/usr/bin/unshare").exists(), reason="no unshare(1) to run cleanup in a pid namespace of its own")
def test_cleanup_leaves_a_run_whose_tasks_another_pid_namespace_runs(tmp_path, layout):
    """Containers sharing this host's cgroup hierarchies do not see each other's tasks in
    cgroup.procs: `--cleanup` run in a pid namespace of its own (unshare -p) must not take a
    busy run of ours for a crashed one; a sleeping one holds its folder (rmdir EBUSY), which
    is said, never raised. Back in our namespace, the same cleanup removes both."""
    before = parent_state(layout)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        for name, proc in (("colosim-elsewhere-busy", busy), ("colosim-elsewhere-asleep", sleeper)):
            for d in _crashed_folder(layout, name):
                (d / "cgroup.procs").write_text(str(proc.pid))
        other_ns = ["unshare", "--pid", "--fork", "--mount-proc", *COLOSIM, "replay", "--cleanup"]
        proc = subprocess.run(other_ns, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
        assert proc.returncode == 0, proc.stderr
        assert "colosim-elsewhere-busy: it is using CPU" in proc.stderr, proc.stderr
        assert "colosim-elsewhere-asleep: not removed" in proc.stderr, proc.stderr
        assert busy.poll() is None and sleeper.poll() is None  # nothing of theirs was killed
        assert all((layout.own_dir(k) / "colosim-elsewhere-busy/x").is_dir() for k in layout.keys)
        proc = subprocess.run([*COLOSIM, "replay", "--cleanup"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert busy.wait(timeout=10) == -signal.SIGKILL and sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        for p in (busy, sleeper):
            p.kill()
            p.wait()
    assert_clean(layout, before)


@pytest.mark.parametrize(
    "program,needs", [("clickhouse", "clickhouse-benchmark"), ("nginx", "wrk"), ("redis", "redis-benchmark"), ("postgres", "pgbench")]
)
def test_real_servers_run_with_their_own_load_generators(tmp_path, layout, program, needs):
    import shutil

    if shutil.which(needs) is None:
        pytest.skip(f"{needs} is not installed (make host-packages)")
    before = parent_state(layout)
    path = tmp_path / "server.toml"
    path.write_text(f"""
[scenario]
name = "server"
duration = "5s"
warmup = "1s"
[cgroups.online]
[workloads.svc]
kind = "closed_loop"
cgroup = "online"
clients = 4
service = "5ms"
host = "{program}"
""")
    cmd = [*COLOSIM, "replay", str(path), "--compare", "--out", str(tmp_path / "o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "o/comparison.json").read_text())
    m = doc["variants"]["server"]["measured"]
    assert m["QPS"] > 1
    assert 0 < m["P50 (s)"] <= m["P90 (s)"] <= m["P99 (s)"] < 5
    assert m["online CPU (share)"] > 0.01  # the server ran in its cgroup
    # the baseline was traced (the server's switches) without taking the node from it: the
    # replay process used under a tenth of it (a trace_pipe text reader took 0.3-0.4 beside
    # nginx and redis: docs/replay.md, "The trace must not disturb what it measures")
    assert 0 <= m["replay CPU (share)"] < 0.1, m
    # the generator's own CPU was measured, and it ran inside the service's cgroup: its CPU is
    # part of the cgroup's (CPU·s/s = per request x QPS), never more (1% for the window's edges)
    fit = doc["calibration"]["services"]["svc"]
    assert fit["client_cpu_s"] > 0
    ncpus = len(os.sched_getaffinity(0))
    assert fit["client_cpu_s"] * m["QPS"] <= m["online CPU (share)"] * ncpus * 1.01 + 0.01
    # ... and its voluntary switches (wait4's rusage): the rounds it waits for the server in
    assert isinstance(fit["rounds"], int) and fit["rounds"] >= 1
    assert doc["calibration"]["quality"] in ("good", "poor") and set(fit["residuals"]) <= set(fit["measured"])
    assert "service model of svc" in proc.stdout
    # the model's percentiles were compared as the generator prints its own (sim/reported.py)
    assert fit["report"] == {"nginx": "wrk", "redis": "redis-benchmark"}.get(program)
    assert_clean(layout, before)


def test_calibrate_measures_each_mechanism_on_host_and_in_the_simulator(tmp_path, layout):
    before = parent_state(layout)
    # A 3 s window beside other work on this shared machine can split 1024:512 unevenly (the
    # other task sits on one CPU, and shares are divided per CPU): a disturbed window is
    # taken again, up to 3 times, before the host's ratio is judged
    for attempt in range(3):
        out = tmp_path / f"c{attempt}"
        proc = subprocess.run([*COLOSIM, "calibrate", "--duration", "3", "--out", str(out)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads((out / "calibration.json").read_text())
        assert len(doc) == 6
        shares = doc["cpu.shares 1024:512"]["CPU a / CPU b"]
        print(f"calibrate: host a/b = {shares['host']:.3f}")
        if shares["host"] == pytest.approx(2.0, rel=0.10):
            break
    # a 3 s window is noisier than the dedicated 2:1 test's 6 s: the host within 10% here
    assert shares["host"] == pytest.approx(2.0, rel=0.10) and shares["sim"] == pytest.approx(2.0, rel=0.02)
    quota = doc["cpu.cfs_quota_us 50% of a CPU"]["CPUs used"]
    assert quota["host"] == pytest.approx(0.5, rel=0.1) and quota["sim"] == pytest.approx(0.5, rel=0.05)
    # sleepers beside hogs: measured on both sides, each group a share of the node (what the
    # split is, is what the mechanism's row records: the host and the core differ there)
    split = doc["cpu.shares equal: sleepers beside hogs"]
    for side in ("host", "sim"):
        s, h = split["sleepers' CPU share"][side], split["hogs' CPU share"][side]
        assert 0 < s < 1 and 0 < h < 1 and s + h <= 1.0 + 1e-6, (side, s, h)
    assert_clean(layout, before)


def test_builtin_service_burns_exactly_its_service_time(tmp_path, layout):
    """One client, 20 ms of CPU per request: each request burns 20 ms of its thread's CPU,
    whatever else the machine runs (the cgroup's CPU time over the requests it completed),
    and takes at least that long."""
    path = tmp_path / "one.toml"
    path.write_text("""
[scenario]
name = "one"
duration = "4s"
warmup = "1s"
[cgroups.online]
[workloads.svc]
kind = "closed_loop"
cgroup = "online"
clients = 1
service = "20ms"
""")
    proc = subprocess.run([*COLOSIM, "replay", str(path), "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "o/comparison.json").read_text())["variants"]["one"]["measured"]
    cpu_per_request = m["online CPU (share)"] * os.cpu_count() / m["QPS"]
    print(f"P50 {m['P50 (s)'] * 1e3:.2f} ms, {m['QPS']:.1f}/s, {cpu_per_request * 1e3:.2f} ms of CPU a request")
    assert cpu_per_request == pytest.approx(0.020, rel=0.05)
    assert m["P50 (s)"] >= 0.020 * 0.99
    # one client issues a request when the last completes: never more than 1 / 20 ms
    assert m["QPS"] <= 50 * 1.01


def test_builtin_duty_burns_its_cores_and_sleeps_the_rest(tmp_path, layout):
    """A duty of 0.6 cores in 50 ms periods (one thread: 30 ms busy, 20 ms asleep): its cgroup
    never uses more than 0.6 CPUs — a hog's thread would take a whole one — and, on a node it
    does not saturate, gets most of it."""
    path = tmp_path / "duty.toml"
    path.write_text("""
[scenario]
name = "duty"
duration = "4s"
warmup = "1s"
[cgroups.tenant]
[workloads.d]
kind = "duty"
cgroup = "tenant"
max_threads = 2
cores = 0.6
period = "50ms"
""")
    proc = subprocess.run([*COLOSIM, "replay", str(path), "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "o/comparison.json").read_text())["variants"]["duty"]["measured"]
    cpus = m["tenant CPU (share)"] * os.cpu_count()
    print(f"the duty used {cpus:.3f} CPUs")
    assert cpus <= 0.6 * 1.05
    assert cpus >= 0.3


@pytest.mark.parametrize("kind, load", [("closed_loop", "clients = 1"), ("open_loop", "rate = 10\nworkers = 1")])
def test_builtin_shaped_service_sleeps_between_its_bursts(tmp_path, layout, kind, load):
    """20 ms of CPU per request in 4 bursts with 5 ms asleep between two
    ([workloads.x.shape]), one thread: colosim-load burns the request's 20 ms of thread CPU
    in its parts and sleeps the waits off the CPU, so the cgroup's CPU per request is the
    service time (the sleeps are charged nothing) and a request takes at least
    20 + 3 × 5 = 35 ms (a closed loop's one client then sends at most 1 / 35 ms)."""
    before = parent_state(layout)
    path = tmp_path / "shaped.toml"
    path.write_text(f"""
[scenario]
name = "shaped"
duration = "8s"
warmup = "1s"
[cgroups.online]
[workloads.svc]
kind = "{kind}"
cgroup = "online"
{load}
service = "20ms"
shape = {{ bursts = 4, wait = "5ms" }}
""")
    proc = subprocess.run([*COLOSIM, "replay", str(path), "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "o/comparison.json").read_text())["variants"]["shaped"]["measured"]
    cpu_per_request = m["online CPU (share)"] * os.cpu_count() / m["QPS"]
    print(
        f"{kind}: P50 {m['P50 (s)'] * 1e3:.2f} ms, P99 {m['P99 (s)'] * 1e3:.2f} ms, {m['QPS']:.1f}/s, "
        f"{cpu_per_request * 1e3:.2f} ms of CPU a request (load {os.getloadavg()[0]:.1f})"
    )
    assert cpu_per_request == pytest.approx(0.020, rel=0.05)
    assert m["P50 (s)"] >= 0.035 * 0.99
    if kind == "closed_loop":
        assert m["QPS"] <= 1 / 0.035 * 1.01
    assert_clean(layout, before)


def test_a_groups_cfs_period_boundaries_stay_on_one_grid_through_throttling(layout):
    """hrtimer_forward moves the period timer in whole periods, through throttles and quiet
    spells alike, so a group's boundaries keep one phase for its life (bandwidth.rs
    `start_cfs_bandwidth`). Under quota 20 ms per 100 ms, 2 ms requests throttled mid-way
    resume at a boundary: they complete at one offset modulo 100 ms. Which offset is the
    kernel's draw (random per group since Linux 6.4; printed, not asserted)."""
    from replay.host_run import run_on_host
    from replay.session import Session
    from sim.scenario import Scenario, Variant

    before = parent_state(layout)
    sc = Scenario.from_document(
        {
            "scenario": {"name": "grid", "duration": "4s", "warmup": "1s", "sample_interval": "0s"},
            "cgroups": {"q": {"cpu.cfs_quota_us": 20_000}},
            "workloads": {"c": {"kind": "closed_loop", "cgroup": "q", "clients": 1, "service": "2ms"}},
        }
    )
    with Session(log=lambda m: None) as session:
        run = run_on_host(Variant("grid", True, sc), 1, session, frozenset())
    svc = run.result.services["c"]
    waited = svc.latencies_s > 0.040  # throttled for most of a period
    offsets = np.round(svc.completions_s[waited] * 1e9).astype(np.int64) % 100_000_000
    assert len(offsets) >= 20  # one a period: the group spends its 20 ms, then waits

    def gaps(ref: int) -> np.ndarray:  # ms from ref, on the 100 ms circle
        return np.abs((offsets - ref + 50_000_000) % 100_000_000 - 50_000_000) / 1e6

    ref = min(offsets, key=lambda o: float(np.percentile(gaps(o), 90)))
    gap = gaps(ref)
    print(
        f"{len(offsets)} throttled requests completed {ref / 1e6:.1f} ms into the run's 100 ms grid; P90 spread {np.percentile(gap, 90):.2f} ms"
    )
    # the rest of a request (< 2 ms of CPU) plus the wakeup: a few ms on a busy machine; a
    # timer that lost its phase would spread these over the whole ±50 ms
    assert np.percentile(gap, 90) <= 10
    assert_clean(layout, before)
