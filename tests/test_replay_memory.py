"""Replay's memory controller against a fake cgroup v1 kernel: the knob mapping, the page
rounding, the refusals (one clear message each, naming what the kernel lacks), the memory
statistics under the simulator's names, and the cleanup order of a memory cgroup.

The fake keeps a limit the way mm/page_counter.c does (whole pages; -1 as PAGE_COUNTER_MAX
pages), refuses a limit under unreclaimable usage with EBUSY (mm/memcontrol-v1.c
mem_cgroup_resize_max) and memory.force_empty while tasks are in the group — what this host's
kernel was seen to do (docs/replay.md, "Memory on the host")."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from test_replay_cgroupfs import V1_FILES, FakeKernel, v1_backend

from policies.cgroup import PAGE_COUNTER_MAX_BYTES, Knob, KnobWrite, memory_limit_pages, parse_memory_limit
from replay.cgroupfs import HostBackend, Layout, detect_layout
from replay.host_run import check_knobs, host_equivalent, oom_kills_by_workload
from replay.workloads import HostWorkload
from sim.errors import HostError, WriteRefused
from sim.scenario import Scenario

MEMORY_FILES = {
    "cgroup.procs": "",
    "memory.limit_in_bytes": str(PAGE_COUNTER_MAX_BYTES),
    "memory.usage_in_bytes": "0",
    "memory.max_usage_in_bytes": "0",
    "memory.failcnt": "0",
    "memory.force_empty": "",
    "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    "memory.stat": "cache 0\nrss 0\ntotal_cache 0\ntotal_rss 0\ntotal_swap 0\ntotal_pgmajfault 0\n",
}
PAGE = 4096


class MemcgV1(FakeKernel):
    """A v1 memory hierarchy as the kernel keeps it (the cpu ones as FakeKernel's), with a
    log of every write and rmdir in order."""

    def __init__(self, root: Path, unreclaimable: int = 0) -> None:
        super().__init__({})
        self.root = root
        self.ops: list[tuple[str, str]] = []
        self.unreclaimable = unreclaimable  # bytes force_empty cannot reclaim (anon, no swap)

    def mkdir(self, path: Path) -> None:
        path.mkdir()
        files = MEMORY_FILES if path.relative_to(self.root).parts[0] == "memory" else V1_FILES[path.relative_to(self.root).parts[0]]
        for name, text in files.items():
            (path / name).write_text(text)

    def write(self, path: Path, text: str) -> None:
        rel = str(path.parent.relative_to(self.root))
        self.ops.append((f"write {path.name}={text}", rel))
        if path.name == "memory.limit_in_bytes":
            value = int(text)
            pages = PAGE_COUNTER_MAX_BYTES // PAGE if value < 0 else value // PAGE  # page_counter_memparse
            if pages * PAGE < int((path.parent / "memory.usage_in_bytes").read_text()):
                raise OSError(errno.EBUSY, "Device or resource busy")
            path.write_text(str(pages * PAGE))
            return
        if path.name == "memory.force_empty":
            if (path.parent / "cgroup.procs").read_text().split():
                raise OSError(errno.EBUSY, "Device or resource busy")
            (path.parent / "memory.usage_in_bytes").write_text(str(self.unreclaimable))
            if self.unreclaimable:
                raise OSError(errno.EBUSY, "Device or resource busy")
            return
        if path.name == "cgroup.procs":  # a task moves: it leaves its old cgroup
            for f in (self.root / "memory").rglob("cgroup.procs"):
                f.write_text(" ".join(p for p in f.read_text().split() if p != text))
            path.write_text((path.read_text() + " " + text).strip())
            return
        super().write(path, text)

    def rmdir(self, path: Path) -> None:
        if (path / "cgroup.procs").exists() and (path / "cgroup.procs").read_text().split():
            raise OSError(errno.EBUSY, "Device or resource busy")
        self.ops.append(("rmdir", str(path.relative_to(self.root))))
        super().rmdir(path)


def memory_backend(tmp_path: Path, unreclaimable: int = 0) -> tuple[HostBackend, MemcgV1]:
    b, _ = v1_backend(tmp_path, controllers={**V1_FILES, "memory": MEMORY_FILES})
    fake = MemcgV1(tmp_path, unreclaimable)
    b.fs = fake
    return b, fake


def mem_dir(tmp_path: Path, cgroup: str = "") -> Path:
    return tmp_path / "memory/me/colosim-t1" / cgroup


def test_a_limit_is_written_in_whole_pages_and_read_back_in_bytes(tmp_path):
    b, fake = memory_backend(tmp_path)
    b.create(["a"])
    # 1,000,000 bytes are 244 whole pages of 4 KiB: 999,424 (this host's kernel read it back so)
    b.write(KnobWrite("a", Knob.MEMORY_LIMIT, 1_000_000))
    assert ("write memory.limit_in_bytes=999424", "memory/me/colosim-t1/a") in fake.ops
    assert b.read("a", Knob.MEMORY_LIMIT) == 999_424
    n = len(fake.ops)
    b.write(KnobWrite("a", Knob.MEMORY_LIMIT, 1_000_001))  # the same 244 pages: nothing to write
    assert len(fake.ops) == n
    b.write(KnobWrite("a", Knob.MEMORY_LIMIT, -1))  # no limit: PAGE_COUNTER_MAX pages
    assert (mem_dir(tmp_path, "a") / "memory.limit_in_bytes").read_text() == "9223372036854771712"
    assert b.read("a", Knob.MEMORY_LIMIT) == -1
    assert b.log[-1].value == "-1" and b.log[-1].old == "999424"


def test_page_rounding_and_the_no_limit_reading():
    assert [memory_limit_pages(v) for v in (-1, 0, 4095, 4096, 1_000_000, 256 << 20)] == [-1, 0, 0, 4096, 999_424, 256 << 20]
    assert parse_memory_limit("9223372036854771712\n") == -1 and parse_memory_limit("max") == -1
    assert parse_memory_limit("268435456") == 268_435_456


@pytest.mark.parametrize(
    ("knob", "words"),
    [
        ("memory.high", "cgroup v1 has no memory.high; this host's stand-in would be memory.soft_limit_in_bytes, which only acts"),
        ("memory.low", "cgroup v1 has no memory.low"),
        ("memory.min", "cgroup v1 has no memory.min"),
        ("memory.oom.group", "cgroup v1 has no memory.oom.group"),
    ],
)
def test_what_v1_lacks_is_refused_naming_the_stand_in(tmp_path, knob, words):
    b, fake = memory_backend(tmp_path)
    b.create([])
    value = 1 if knob == "memory.oom.group" else "64Mi"
    sc = Scenario.from_document(
        {
            "scenario": {"name": "s", "duration": "1s"},
            "cgroups": {"x": {knob: value}},
            "workloads": {"h": {"kind": "hog", "cgroup": "x", "threads": 1}},
        }
    )
    missing = {k for k in Knob if k.controller == "memory" and not k.read_only and not b.has_file("", k)}
    with pytest.raises(HostError) as err:
        check_knobs([sc], missing, lambda m: None)
    message = str(err.value)
    assert message.startswith(f'cgroups."x"."{knob}": ') and words in message and "not replayed" in message
    assert "\n" not in message
    # and a policy's write of it at run time: the same refusal, nothing written
    b.create(["x"])
    n = len(fake.ops)
    with pytest.raises(HostError, match=f"x/{knob}: cgroup v1 has no {knob}"):
        b.write(KnobWrite("x", Knob.named(knob), 1 if knob == "memory.oom.group" else 1 << 26))
    assert len(fake.ops) == n


def test_a_limit_under_unreclaimable_usage_is_refused_with_the_reason(tmp_path):
    b, _ = memory_backend(tmp_path)
    b.create(["a"])
    (mem_dir(tmp_path, "a") / "memory.usage_in_bytes").write_text(str(100 << 20))
    with pytest.raises(WriteRefused, match="memory.limit_in_bytes: the kernel refused '67108864': .*could not be reclaimed below it"):
        b.write(KnobWrite("a", Knob.MEMORY_LIMIT, 64 << 20))


def test_memory_stats_carry_the_v1_files_under_the_simulators_names(tmp_path):
    b, _ = memory_backend(tmp_path)
    b.create(["a"])
    d = mem_dir(tmp_path, "a")
    (d / "memory.usage_in_bytes").write_text("134217728\n")
    (d / "memory.max_usage_in_bytes").write_text("140000000\n")
    (d / "memory.failcnt").write_text("17\n")
    (d / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 1\noom_kill 2\n")
    (d / "memory.stat").write_text("cache 5\nrss 6\ntotal_cache 100663296\ntotal_rss 33554432\ntotal_swap 0\ntotal_pgmajfault 9\n")
    m = b.memory_stats("a")
    assert (m["current"], m["peak"], m["file"], m["anon"], m["swap"]) == (134217728, 140000000, 100663296, 33554432, 0)
    assert (m["events_max"], m["events_oom_kill"], m["under_oom"], m["pgmajfault"], m["events_high"]) == (17, 2, 1, 9, 0)
    s = b.stats("a")
    assert (s.memory_bytes, s.memory_file, s.memory_max_events, s.memory_oom_kills) == (134217728, 100663296, 17, 2)


def test_cleanup_moves_tasks_out_then_force_empties_then_removes_children_first(tmp_path):
    b, fake = memory_backend(tmp_path)
    b.create(["p/c"])
    (mem_dir(tmp_path, "p/c") / "cgroup.procs").write_text("4242")  # a task the kill did not reach
    fake.ops.clear()
    b.remove()
    mem_ops = [(op, where) for op, where in fake.ops if "memory" in where]
    assert mem_ops == [
        ("write cgroup.procs=4242", "memory/me/colosim-t1"),  # out to the run folder
        ("write memory.force_empty=0", "memory/me/colosim-t1/p/c"),
        ("rmdir", "memory/me/colosim-t1/p/c"),
        ("write memory.force_empty=0", "memory/me/colosim-t1/p"),
        ("rmdir", "memory/me/colosim-t1/p"),
        ("write memory.force_empty=0", "memory/me/colosim-t1"),
    ]
    # the run folder still holds the task: reported, not raised, and every other cgroup is gone
    assert len(b.leftovers) == 2 and all(x.startswith(str(mem_dir(tmp_path))) for x in b.leftovers)
    assert "memory.force_empty could not reclaim everything" in b.leftovers[0] and "not removed (Device or resource busy)" in b.leftovers[1]
    assert not (tmp_path / "cpu/me/colosim-t1").exists() and not mem_dir(tmp_path, "p").exists()


def test_charges_force_empty_cannot_reclaim_are_reported_and_the_cgroup_still_goes(tmp_path):
    b, _ = memory_backend(tmp_path, unreclaimable=8192)
    b.create(["a"])
    b.remove()
    assert not mem_dir(tmp_path).exists()
    assert len(b.leftovers) == 2 and all("8192 bytes still charged" in x for x in b.leftovers)


def test_the_memory_hierarchy_is_used_only_when_asked_and_must_be_there_when_needed():
    mountinfo = "\n".join(
        [
            "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu",
            "31 25 0:27 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct",
            "32 25 0:28 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset",
            "33 25 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
        ]
    )
    self_cgroup = "4:memory:/m\n3:cpuset:/\n2:cpuacct:/x\n1:cpu:/x\n0::/\n"
    assert not detect_layout(mountinfo, self_cgroup).memory
    layout = detect_layout(mountinfo, self_cgroup, memory=True)
    assert layout.memory and layout.own_dir("memory") == Path("/sys/fs/cgroup/memory/m")
    with pytest.raises(HostError, match="no memory hierarchy mounted"):
        detect_layout(mountinfo.rsplit("\n", 1)[0], self_cgroup, memory=True)


def test_the_prediction_simulates_the_limit_the_kernel_holds():
    sc = Scenario.from_toml('[scenario]\nname = "s"\nduration = "1s"\n[cgroups.a]\n"memory.limit_in_bytes" = 1000000\n')
    assert host_equivalent(sc, set()).cgroups["a"].memory_limit == 999_424
    whole = Scenario.from_toml('[scenario]\nname = "s"\nduration = "1s"\n[cgroups.a]\n"memory.limit_in_bytes" = "1Mi"\n')
    assert host_equivalent(whole, set()) is whole


MEMORY_SCENARIO = """
[scenario]
name = "m"
duration = "1s"
[node]
memory = "1Gi"
[cgroups.a]
[workloads.hog]
kind = "memory_hog"
cgroup = "a"
host = "stress"
threads = 2
bytes = "64Mi"
"""


def hog(extra: str = "", host: str = '"stress"') -> HostWorkload:
    sc = Scenario.from_toml(MEMORY_SCENARIO.replace('host = "stress"', f"host = {host}") + extra)
    w = sc.workloads["hog"]
    return HostWorkload("hog", w, w.core_spec("hog", 2), "workloads.hog")


def test_a_memory_hog_is_stress_vm_in_each_mode():
    assert hog().stress_vm_argv(2.5) == ["stress", "--vm", "2", "--vm-bytes", str(64 << 20), "--timeout", "3s"]
    assert "--vm-keep" in hog('mode = "keep"\n').stress_vm_argv(1)
    hang = hog('mode = "hang"\nhang = "2s"\n').stress_vm_argv(1)
    assert hang[hang.index("--vm-hang") + 1] == "2"
    assert hog("oom_score_adj = 500\n").stress_vm_argv(1)[:4] == ["choom", "-n", "500", "--"]


def test_memory_workloads_the_host_cannot_run_are_refused_with_what_to_use():
    with pytest.raises(
        HostError, match=r'workloads.hog.host.program: a memory_hog runs on the host as `stress --vm` only \(host = "stress"\)'
    ):
        hog(host='"builtin"').check()
    with pytest.raises(HostError, match="stress --vm-hang takes whole seconds"):
        hog('mode = "hang"\nhang = "1500ms"\n').check()
    sc = Scenario.from_toml(
        MEMORY_SCENARIO.split("[workloads.hog]")[0]
        + '[workloads.web]\nkind = "file_server"\ncgroup = "a"\nhost = "nginx"\nclients = 1\nservice = { dist = "constant", value = "1ms" }\n'
        + 'working_set = "1Mi"\nfile_size = "64Ki"\n'
    )
    w = sc.workloads["web"]
    with pytest.raises(HostError, match="a file_server replays with colosim-load's file reader only"):
        HostWorkload("web", w, w.core_spec("web", 2), "workloads.web").check()


def test_oom_kills_go_to_the_workload_of_their_cgroup():
    sc = Scenario.from_toml(MEMORY_SCENARIO)
    assert oom_kills_by_workload(sc, {"a": {"events_oom_kill": 1}}) == {"hog": 1}
    assert oom_kills_by_workload(sc, {"a": {"events_oom_kill": 0}}) == {}


def test_v2_writes_max_for_no_limit(tmp_path):
    own = tmp_path / "unified/me"
    own.mkdir(parents=True)
    files = {
        "cgroup.procs": "",
        "cgroup.subtree_control": "",
        "cpuset.cpus": "",
        "cpuset.mems": "",
        "memory.max": "max",
        "memory.high": "max",
    }
    for n, t in files.items():
        (own / n).write_text(t)
    b = HostBackend(Layout(2, {"": tmp_path / "unified"}, {"": "/me"}, memory_v2=True), "t2", fs=FakeKernel(files))
    b.create(["a"])
    assert (own / "colosim-t2/cgroup.subtree_control").read_text() == "+cpu +cpuset +memory"
    b.write(KnobWrite("a", Knob.MEMORY_HIGH, 1_000_000))
    assert (own / "colosim-t2/a/memory.high").read_text() == "999424"
    b.write(KnobWrite("a", Knob.MEMORY_LIMIT, -1))
    assert b.read("a", Knob.MEMORY_LIMIT) == -1


def test_a_memory_write_in_a_run_without_the_memory_controller_says_how_to_get_it(tmp_path):
    b, fake = v1_backend(tmp_path)  # cpu, cpuacct, cpuset only
    b.create(["a"])
    with pytest.raises(HostError, match=r"a/memory.limit_in_bytes: this run did not open the memory controller .* set \[node\] memory"):
        b.write(KnobWrite("a", Knob.MEMORY_LIMIT, 1 << 26))


def test_the_predicted_hit_ratio_is_the_cached_share_of_a_uniformly_read_set():
    """Uniform reads over W bytes with C of them cached hit with probability C / W (the
    independent-reference model: any replacement policy). A 64 MiB set under a 32 MiB limit
    holds ~32 MiB once warm: hit ratio ~0.5; without the limit, every read after the first
    pass hits."""
    pytest.importorskip("sim._core")
    from sim.runner import run_variant
    from sim.scenario import Variant

    doc = """
[scenario]
name = "h"
duration = "6s"
warmup = "3s"
[node]
cores_per_socket = 2
memory = "4Gi"
[cgroups.web]
"memory.limit_in_bytes" = "32Mi"
[workloads.web]
kind = "file_server"
cgroup = "web"
clients = 2
service = { dist = "constant", value = "50us" }
working_set = "64Mi"
file_size = "1Mi"
"""
    limited = run_variant(Variant("h", True, Scenario.from_toml(doc)), 1).services["web"]
    assert limited.hits is not None and limited.misses is not None
    ratio = limited.hits / (limited.hits + limited.misses)
    assert abs(ratio - 0.5) < 0.05, ratio
    free = run_variant(Variant("h", True, Scenario.from_toml(doc.replace('"memory.limit_in_bytes" = "32Mi"', ""))), 1).services["web"]
    assert free.misses == 0 and free.hits == free.started


def test_an_alibaba_only_memcg_file_is_refused_at_run_time_naming_the_file(tmp_path):
    """memory.wmark_min_adj (Koordinator's memory QoS writes it per class) exists only on
    Alibaba Cloud Linux's cgroup v1: a mainline kernel lacks it, so replay refuses the write
    with one message and writes nothing."""
    b, fake = memory_backend(tmp_path)
    b.create(["x"])
    n = len(fake.ops)
    with pytest.raises(HostError) as err:
        b.write(KnobWrite("x", Knob.MEMORY_WMARK_MIN_ADJ, 50))
    message = str(err.value)
    assert message.startswith("x/memory.wmark_min_adj: this kernel has no memory.wmark_min_adj") and "not replayed" in message
    assert "\n" not in message and len(fake.ops) == n
