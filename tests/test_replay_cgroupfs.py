"""Host cgroup backends against a fake kernel: temporary directories laid out as a cgroup v1
(a hierarchy per controller) and a v2 (unified) hierarchy, file by file."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.cgroup import BLKIO_KNOBS, MEMORY_KNOBS, NET_KNOBS, PRESSURE_KNOBS, ROOT_KNOBS, Knob, KnobWrite, Substituting
from replay.cgroupfs import Fs, HostBackend, Layout, detect_layout, held_elsewhere, leftover_folders, read_proc_stat, remove_tree
from replay.host_run import cgroup_writes, check_knobs, host_equivalent, host_scheduler, missing_knobs
from replay.workloads import parse_clickhouse_json, parse_wrk
from sim.errors import HostError
from sim.scenario import Scenario

V1_FILES = {
    "cpu": {
        "cgroup.procs": "",
        "tasks": "",
        "cpu.shares": "1024",
        "cpu.idle": "0",
        "cpu.cfs_quota_us": "-1",
        "cpu.cfs_period_us": "100000",
        "cpu.cfs_burst_us": "0",
        "cpu.stat": "nr_periods 7\nnr_throttled 3\nthrottled_time 5000000\nnr_bursts 1\nburst_time 2000\n",
    },
    "cpuacct": {"cgroup.procs": "", "cpuacct.usage": "123456789", "cpuacct.usage_percpu": "100 200 "},
    "cpuset": {"cgroup.procs": "", "cpuset.cpus": "", "cpuset.mems": ""},
}
V2_FILES = {
    "cgroup.procs": "",
    "cgroup.threads": "",
    "cgroup.subtree_control": "",
    "cpu.weight": "100",
    "cpu.max": "max 100000",
    "cpu.max.burst": "0",
    "cpu.idle": "0",
    "cpuset.cpus": "",
    "cpuset.mems": "",
    "cpu.stat": "usage_usec 1500\nnr_periods 4\nnr_throttled 2\nthrottled_usec 30\nnr_bursts 0\nburst_usec 0\n",
    "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=250\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
}


class FakeKernel(Fs):
    """mkdir populates a new cgroup's files as the kernel would; writes are checked for the
    ranges the kernel enforces, so a bad conversion would be refused here too."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.writes: list[tuple[Path, str]] = []

    def mkdir(self, path: Path) -> None:
        path.mkdir()
        for name, text in self.files.items():
            (path / name).write_text(text)

    def write(self, path: Path, text: str) -> None:
        if path.name == "cpu.weight" and not 1 <= int(text) <= 10_000:
            raise OSError(22, "Invalid argument")
        if path.name == "cpu.shares" and not 2 <= int(text) <= 262_144:
            raise OSError(22, "Invalid argument")
        self.writes.append((path, text))
        path.write_text(text)

    def rmdir(self, path: Path) -> None:
        # A cgroup's files are the kernel's, not the directory's: rmdir of an empty cgroup works.
        if any(p.is_dir() for p in path.iterdir()):
            raise OSError(16, "Device or resource busy")
        for f in path.iterdir():
            f.unlink()
        path.rmdir()


def v1_backend(
    tmp_path: Path, drop: tuple[str, ...] = (), controllers: dict[str, dict[str, str]] | None = None
) -> tuple[HostBackend, FakeKernel]:
    """A hierarchy per controller under tmp_path/<controller>; our own cgroup is /me."""
    files = {c: {k: v for k, v in f.items() if k not in drop} for c, f in (controllers or V1_FILES).items()}
    for c, f in files.items():
        own = tmp_path / c / "me"
        own.mkdir(parents=True)
        for name, text in f.items():
            (own / name).write_text(text)
    (tmp_path / "cpuset/me/cpuset.cpus").write_text("0-3\n")
    (tmp_path / "cpuset/me/cpuset.mems").write_text("0\n")

    class PerController(FakeKernel):
        def mkdir(self, path: Path) -> None:
            path.mkdir()
            for name, text in files[path.relative_to(tmp_path).parts[0]].items():
                (path / name).write_text(text)

    layout = Layout(1, {c: tmp_path / c for c in files}, {c: "/me" for c in files})
    fake = PerController({})
    return HostBackend(layout, "t1", fs=fake), fake


def v2_backend(tmp_path: Path, subtree: str = "cpu cpuset") -> tuple[HostBackend, FakeKernel]:
    own = tmp_path / "unified" / "me"
    own.mkdir(parents=True)
    for name, text in V2_FILES.items():
        (own / name).write_text(text)
    (own / "cgroup.subtree_control").write_text(subtree + "\n")
    fake = FakeKernel(V2_FILES)
    return HostBackend(Layout(2, {"": tmp_path / "unified"}, {"": "/me"}), "t2", fs=fake), fake


def test_v2_names_and_unit_conversions(tmp_path):
    b, fake = v2_backend(tmp_path)
    b.create(["online", "offline"])
    d = tmp_path / "unified/me/colosim-t2"
    # the run folder and its children hand the cpu and cpuset controllers down
    assert (d / "cgroup.subtree_control").read_text() == "+cpu +cpuset"
    b.write(KnobWrite("offline", Knob.CPU_SHARES, 2))  # weight = shares x 100 / 1024, at least 1
    b.write(KnobWrite("online", Knob.CPU_SHARES, 2048))
    assert (d / "offline/cpu.weight").read_text() == "1"
    assert (d / "online/cpu.weight").read_text() == "200"
    assert b.read("online", Knob.CPU_SHARES) == 2048  # weight -> shares: 200 x 1024 / 100
    b.write(KnobWrite("offline", Knob.CPU_CFS_QUOTA_US, 50_000))
    assert (d / "offline/cpu.max").read_text() == "50000 100000"
    b.write(KnobWrite("offline", Knob.CPU_CFS_PERIOD_US, 200_000))
    assert (d / "offline/cpu.max").read_text() == "50000 200000"
    assert b.read("offline", Knob.CPU_CFS_QUOTA_US) == 50_000
    b.write(KnobWrite("offline", Knob.CPU_CFS_QUOTA_US, -1))
    assert (d / "offline/cpu.max").read_text() == "max 200000"
    b.write(KnobWrite("offline", Knob.CPU_CFS_BURST_US, 10_000))
    assert (d / "offline/cpu.max.burst").read_text() == "10000"
    b.write(KnobWrite("offline", Knob.CPUSET_CPUS, "1"))
    assert (d / "offline/cpuset.cpus").read_text() == "1"
    s = b.stats("offline")
    assert (s.usage_ns, s.nr_throttled, s.throttled_ns, s.psi_some_ns) == (1_500_000, 2, 30_000, 250_000)


def test_v1_names_live_in_their_controllers_hierarchy(tmp_path):
    b, fake = v1_backend(tmp_path)
    b.create(["kubepods/besteffort"])
    run = "me/colosim-t1"
    # a new v1 cpuset starts with its parent's cpus and mems, or no task could join it
    assert (tmp_path / "cpuset" / run / "kubepods/besteffort/cpuset.cpus").read_text() == "0-3"
    assert (tmp_path / "cpuset" / run / "cpuset.mems").read_text() == "0"
    b.write(KnobWrite("kubepods/besteffort", Knob.CPU_SHARES, 2))
    b.write(KnobWrite("kubepods/besteffort", Knob.CPUSET_CPUS, "2-3"))
    assert (tmp_path / "cpu" / run / "kubepods/besteffort/cpu.shares").read_text() == "2"
    assert (tmp_path / "cpuset" / run / "kubepods/besteffort/cpuset.cpus").read_text() == "2-3"
    s = b.stats("kubepods/besteffort")
    assert (s.usage_ns, s.nr_periods, s.nr_throttled, s.throttled_ns, s.burst_ns) == (123456789, 7, 3, 5_000_000, 2000)
    assert b.percpu_usage("kubepods/besteffort") == [100, 200]
    assert b.join_paths("kubepods") == [tmp_path / c / run / "kubepods/cgroup.procs" for c in ("cpu", "cpuacct", "cpuset")]


def test_unchanged_values_are_skipped_and_every_write_is_logged(tmp_path):
    b, fake = v1_backend(tmp_path)
    b.create(["a"])
    n = len(fake.writes)
    b.write(KnobWrite("a", Knob.CPU_SHARES, 1024))  # already 1024
    assert len(fake.writes) == n
    b.write(KnobWrite("a", Knob.CPU_SHARES, 512))
    assert len(fake.writes) == n + 1
    assert b.log[-1].value == "512" and b.log[-1].old == "1024" and b.log[-1].path.endswith("a/cpu.shares")


def test_nested_limits_are_written_in_an_order_the_kernel_accepts(tmp_path):
    b, fake = v1_backend(tmp_path)
    b.create(["p/c"])
    b.apply([KnobWrite("p/c", Knob.CPU_CFS_QUOTA_US, 20_000), KnobWrite("p", Knob.CPU_CFS_QUOTA_US, 50_000)])
    order = [p.parent.name for p, _ in fake.writes if p.name == "cpu.cfs_quota_us"]
    assert order == ["c", "p"]  # tightening from no limit: child first
    fake.writes.clear()
    b.apply([KnobWrite("p", Knob.CPU_CFS_QUOTA_US, 100_000), KnobWrite("p/c", Knob.CPU_CFS_QUOTA_US, 80_000)])
    order = [p.parent.name for p, _ in fake.writes if p.name == "cpu.cfs_quota_us"]
    assert order == ["p", "c"]  # loosening: parent first


def test_values_out_of_range_are_refused_before_any_file_is_touched(tmp_path):
    b, fake = v1_backend(tmp_path)
    b.create(["a"])
    n = len(fake.writes)
    for w in (
        KnobWrite("a", Knob.CPU_SHARES, 1),
        KnobWrite("a", Knob.CPU_CFS_QUOTA_US, 500),
        KnobWrite("a", Knob.CPU_IDLE, 2),
        KnobWrite("a", Knob.CPUSET_CPUS, "x-y"),
    ):
        with pytest.raises(ValueError, match="a/"):
            b.write(w)
    assert len(fake.writes) == n


def test_paths_cannot_escape_the_run_folder(tmp_path):
    b, _ = v1_backend(tmp_path)
    with pytest.raises(ValueError, match="outside the run folder"):
        b.dir("cpu", "../../elsewhere")


def test_dry_run_writes_nothing_and_records_everything(tmp_path):
    b, fake = v2_backend(tmp_path)
    b.dry_run = True
    before = sorted(p.name for p in (tmp_path / "unified/me").iterdir())
    b.create(["x"])
    b.apply([KnobWrite("x", Knob.CPU_SHARES, 2), KnobWrite("x", Knob.CPU_CFS_QUOTA_US, 20_000)])
    assert sorted(p.name for p in (tmp_path / "unified/me").iterdir()) == before
    assert fake.writes == []
    assert [(Path(r.path).name, r.value) for r in b.log][-2:] == [("cpu.weight", "1"), ("cpu.max", "20000 100000")]


def test_v2_without_delegated_controllers_is_one_clear_error(tmp_path, monkeypatch):
    b, _ = v2_backend(tmp_path, subtree="memory")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    with pytest.raises(HostError, match="cpu, cpuset not enabled for children"):
        b.check_writable()


def test_removal_is_bottom_up_and_complete(tmp_path):
    b, _ = v1_backend(tmp_path)
    b.create(["a/b/c", "d"])
    b.remove()
    for c in ("cpu", "cpuacct", "cpuset"):
        assert not (tmp_path / c / "me/colosim-t1").exists()


def test_leftovers_are_found_and_removed_with_their_tasks_killed(tmp_path):
    b, _ = v1_backend(tmp_path)
    b.create(["a/b"])
    (tmp_path / "cpu/me/colosim-t1/a/b/cgroup.procs").write_text("4242\n")
    found = leftover_folders(b.layout)
    assert len(found) == 3
    killed = []

    for f in found:
        remove_tree(f, fs=b.fs, kill=killed.append)
    assert killed == [4242]
    assert leftover_folders(b.layout) == []


def test_detect_layout_prefers_the_v1_cpu_hierarchy():
    mountinfo = "\n".join(
        [
            "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu",
            "31 25 0:27 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct",
            "32 25 0:28 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset",
            "33 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw",
        ]
    )
    self_cgroup = "3:cpuset:/\n2:cpuacct:/x\n1:cpu:/x\n0::/\n"
    layout = detect_layout(mountinfo, self_cgroup)
    assert layout.version == 1
    assert layout.own_dir("cpu") == Path("/sys/fs/cgroup/cpu/x")
    v2 = detect_layout("40 1 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw", "0::/user.slice/me\n")
    assert v2.version == 2 and v2.own_dir("") == Path("/sys/fs/cgroup/user.slice/me")
    with pytest.raises(HostError, match="no cgroup hierarchy with the cpu controller"):
        detect_layout("", "")


SCENARIO = """
[scenario]
name = "s"
duration = "2s"
[cgroups.on]
[cgroups.off]
"cpu.qos_level" = -1
"cpu.cfs_quota_us" = 50000
"cpu.cfs_burst_us" = 10000
[workloads.h]
kind = "hog"
cgroup = "off"
threads = 1
"""


def test_a_missing_knob_with_a_stand_in_is_substituted_everywhere(tmp_path):
    b, _ = v1_backend(tmp_path)
    b.create([])
    sc = Scenario.from_toml(SCENARIO)
    # the IO, network and node-wide knobs are not probed in a run without IO (missing_knobs)
    skip = PRESSURE_KNOBS | BLKIO_KNOBS | NET_KNOBS | ROOT_KNOBS
    missing = {k for k in Knob if k not in skip and not b.has_file("", k)}
    assert missing - MEMORY_KNOBS == {Knob.CPU_QOS_LEVEL} and MEMORY_KNOBS <= missing
    said = []
    substituted = check_knobs([sc], missing, said.append)
    assert substituted == {Knob.CPU_QOS_LEVEL} and "cpu.idle" in said[0]
    host = host_equivalent(sc, substituted)
    assert (host.cgroups["off"].cpu_idle, host.cgroups["off"].cpu_qos_level) == (1, 0)
    # and a policy's write of the missing knob lands on the stand-in
    b.create(["off"])
    Substituting(b, substituted).write(KnobWrite("off", Knob.CPU_QOS_LEVEL, -1))
    assert (tmp_path / "cpu/me/colosim-t1/off/cpu.idle").read_text() == "1"
    assert Substituting(b, substituted).read("off", Knob.CPU_QOS_LEVEL) == -1


def test_a_missing_knob_without_a_stand_in_fails_before_anything_runs(tmp_path):
    b, _ = v1_backend(tmp_path, drop=("cpu.cfs_burst_us",))
    b.create([])
    sc = Scenario.from_toml(SCENARIO)
    with pytest.raises(HostError, match="sets cpu.cfs_burst_us, which this host's kernel does not have"):
        check_knobs([sc], {k for k in Knob if not b.has_file("", k)}, lambda m: None)


def test_scenario_knobs_become_writes_parents_first_period_before_quota():
    sc = Scenario.from_toml(SCENARIO)
    assert [(w.cgroup, w.knob.v1, w.value) for w in cgroup_writes(sc)] == [
        ("off", "cpu.qos_level", -1),
        ("off", "cpu.cfs_quota_us", 50000),
        ("off", "cpu.cfs_burst_us", 10000),
    ]


def test_host_scheduler_follows_the_kernel_release():
    assert host_scheduler("6.18.44-fc") == "eevdf"
    assert host_scheduler("6.6.0") == "eevdf"
    assert host_scheduler("5.10.0-60.18.0.50.oe2203.x86_64") == "cfs"


def test_proc_stat_busy_excludes_idle_and_iowait():
    s = read_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 0 0 0 0 0 0 0 0 0\ncpu1 1 0 0 0 0 0 0 0 0 0\n")
    assert s.ncpus == 2
    assert s.busy_ns * 1000 == s.total_ns * 150  # 150 busy of 1000 ticks


def test_generator_reports_are_parsed():
    ch = parse_clickhouse_json(
        "c", '{"statistics": {"QPS": 11.1, "num_queries": 56},"query_time_percentiles": {"50": 0.178, "90": 0.193, "99": 0.208}}', 5.0
    )
    assert (ch.qps, ch.p50_s, ch.p90_s, ch.p99_s, ch.completed) == (11.1, 0.178, 0.193, 0.208, 56)
    nested = parse_clickhouse_json("c", '{"localhost:9000": {"statistics": {"QPS": 2.0}, "query_time_percentiles": {"50": 0.5}}}', 5.0)
    assert nested.p50_s == 0.5
    wrk = parse_wrk(
        "w",
        """Running 5s test @ http://127.0.0.1:80/
  Latency Distribution
     50%  210.00us
     75%  1.50ms
     90%    2.00ms
     99%   1.20s
  5000 requests in 5.00s, 1.00MB read
Requests/sec:   1000.00
""",
        5.0,
    )
    assert (wrk.p50_s, wrk.p90_s, wrk.p99_s, wrk.qps, wrk.completed) == pytest.approx((210e-6, 2e-3, 1.2, 1000.0, 5000))
    with pytest.raises(HostError, match="wrk printed no latency distribution"):
        parse_wrk("w", "connection refused", 5.0)


def test_missing_knobs_probe_uses_the_run_folder(tmp_path):
    b, _ = v2_backend(tmp_path)
    b.create([])

    class S:
        backend = b

    # v2: no qos_level; cpu.shares is cpu.weight; the memory knobs are not probed in a run
    # that does not use the memory controller (as blkio's without IO)
    assert missing_knobs(S()) == {Knob.CPU_QOS_LEVEL}


def test_v1_io_accounting_is_switched_on_by_a_non_binding_rule_inside_the_run_folder(tmp_path):
    """Linux 6.10+ attaches blk-throttle (which keeps v1's io_service_bytes) to a disk only
    when a throttle rule is first written for it; replay writes "MAJ:MIN 0" (v1: no limit)
    in its own run folder, and nothing anywhere else."""
    from replay.cgroupfs import BlockDevice

    blkio = {"cgroup.procs": "", "blkio.throttle.read_bps_device": "", "blkio.throttle.io_service_bytes": "Total 0\n"}
    b, fake = v1_backend(tmp_path, controllers={"blkio": blkio, "cpuset": V1_FILES["cpuset"]})
    own = tmp_path / "blkio" / "me"
    b.device = BlockDevice("254:0", "vda", "mq-deadline")
    b.create(["dd"])
    n = len(fake.writes)
    said = b.activate_io_accounting()
    assert fake.writes[n:] == [(own / "colosim-t1/blkio.throttle.read_bps_device", "254:0 0")]
    assert "io_service_bytes" in said and "254:0" in said
    assert (own / "blkio.throttle.read_bps_device").read_text() == ""  # our own cgroup untouched


def test_v2_io_accounting_needs_no_write(tmp_path):
    from replay.cgroupfs import BlockDevice

    b, fake = v2_backend(tmp_path)
    b.device = BlockDevice("254:0", "vda", "mq-deadline")
    n = len(fake.writes)
    assert "io.stat" in b.activate_io_accounting()
    assert len(fake.writes) == n


def test_a_v2_folder_populated_by_tasks_not_visible_here_is_held_elsewhere(tmp_path):
    """v2's cgroup.events counts every task, cgroup.procs only this pid namespace's: populated
    with nothing listed is another container's run; listed tasks are ours to judge."""
    layout = Layout(2, {"": tmp_path}, {"": "/"})
    folder = tmp_path / "colosim-x"
    (folder / "a").mkdir(parents=True)
    for d in (folder, folder / "a"):
        (d / "cgroup.procs").write_text("")
    (folder / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    assert "not visible in this pid namespace" in held_elsewhere(folder, layout)
    (folder / "a/cgroup.procs").write_text("4242\n")
    assert held_elsewhere(folder, layout) is None
    (folder / "a/cgroup.procs").write_text("")
    (folder / "cgroup.events").write_text("populated 0\nfrozen 0\n")
    assert held_elsewhere(folder, layout) is None
