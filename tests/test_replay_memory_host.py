"""Memory on this host's real memory cgroups (cgroup v1, or v2): what the kernel promises.

* usage never passes memory.limit_in_bytes by more than the charge the kernel may force past
  it (MEMCG_CHARGE_BATCH pages), and failcnt counts the charges the limit refused;
* an allocator past its limit with no swap is OOM-killed, once, and the run leaves nothing;
* a reader's page cache is squeezed by a writer under the same limit, and not by a writer
  under a limit of its own (memcg reclaim works within the limit's subtree).

Root, a writable memory hierarchy beneath our own cgroup, stress and fincore are needed;
elsewhere these tests skip with the reason. Each takes a few seconds."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from host_replay import unavailable

from policies.cgroup import MEMCG_CHARGE_BATCH, PAGE_SIZE, Knob, KnobWrite
from replay.cgroupfs import detect_layout, leftover_folders
from replay.session import Session
from sim.errors import HostError

MIB = 1 << 20


def _reason() -> str | None:
    why = unavailable()
    if why:
        return why
    try:
        layout = detect_layout(memory=True)
    except HostError as err:
        return str(err)
    if not os.access(layout.own_dir("memory" if layout.version == 1 else ""), os.W_OK):
        return "the memory hierarchy is not writable here"
    for program in ("stress", "dd", "fincore", "cat"):
        if shutil.which(program) is None:
            return f"{program} not found"
    return None


REASON = _reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host memory replay unavailable: {REASON}")
SLACK = MEMCG_CHARGE_BATCH * PAGE_SIZE  # what a forced charge may pass the limit by


@pytest.fixture
def layout():
    return detect_layout(memory=True)


def memory_state(layout) -> tuple[list[Path], str, str]:
    """Our own memory cgroup as replay must leave it: its run folders (the memory hierarchy
    beneath our own cgroup is ours alone, where the cpu hierarchies' may hold other replays'
    on a shared host), its children and its limit."""
    own = layout.own_dir("memory" if layout.version == 1 else "")
    limit = (own / "memory.limit_in_bytes").read_text() if layout.version == 1 else ""
    mine = [f for f in leftover_folders(layout) if f.is_relative_to(own)]
    return mine, " ".join(sorted(p.name for p in own.iterdir() if p.is_dir())), limit


def cold_files(d: Path, n: int, size: int) -> list[Path]:
    """n files of data (no holes), written by us, flushed and dropped from the page cache."""
    d.mkdir(exist_ok=True)
    block = os.urandom(MIB)
    out = []
    for i in range(n):
        f = d / f"f-{i}"
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for _ in range(size // MIB):
                os.write(fd, block)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        out.append(f)
    return out


def resident(files: list[Path]) -> int:
    """Bytes of `files` in the page cache (util-linux fincore, mincore(2))."""
    text = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES", *map(str, files)], capture_output=True, text=True)
    return sum(int(x) for x in text.stdout.split())


def run(session: Session, argv: list[str], cgroup: str, timeout: float = 60) -> int:
    proc = session.spawn(argv, cgroup)
    return proc.wait(timeout=timeout)


def test_usage_stays_under_the_limit_while_failcnt_counts_refused_charges(layout):
    limit = 64 * MIB
    with Session(memory=True, log=lambda m: None) as s:
        b = s.backend
        b.create(["w"])
        b.write(KnobWrite("w", Knob.MEMORY_LIMIT, limit))
        assert b.read("w", Knob.MEMORY_LIMIT) == limit
        f = s.scratch() / "big"
        dd = s.spawn(["dd", "if=/dev/zero", f"of={f}", f"bs={MIB}", "count=256", "status=none"], "w")
        usage = []
        while dd.poll() is None:
            usage.append(b.memory_stats("w")["current"])
            time.sleep(0.005)
        assert dd.returncode == 0
        m = b.memory_stats("w")
    # the page cache of 256 MiB written fills the limit and no more
    assert max(usage) <= limit + SLACK and m["peak"] <= limit + SLACK, (max(usage), m["peak"])
    # and reaches it: within the charges in flight when reclaim starts (a batch stocked per
    # CPU, and what one reclaim pass takes beyond the charge that failed)
    assert m["peak"] >= 0.97 * limit, "the writer never reached its limit"
    assert m["events_max"] > 0  # memory.failcnt: charges the limit refused (then reclaimed for)


def hog_scenario(tmp: Path) -> Path:
    path = tmp / "oom.toml"
    path.write_text("""
[scenario]
name = "oom"
duration = "3s"
warmup = "1s"
[node]
memory = "1Gi"
[cgroups.hog]
"memory.limit_in_bytes" = "64Mi"
[workloads.hog]
kind = "memory_hog"
cgroup = "hog"
host = "stress"
bytes = "128Mi"
mode = "keep"
""")
    return path


def test_an_allocator_over_its_limit_is_oom_killed_once_and_nothing_is_left(tmp_path, layout):
    swap = sum(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("SwapTotal:"))
    if swap:
        pytest.skip("this host has swap: the allocator would be swapped out, not killed")
    before = memory_state(layout)
    assert before[0] == [], "a leftover run folder from an earlier run: colosim replay --cleanup"
    proc = subprocess.run(
        [sys.executable, "-m", "sim", "replay", str(hog_scenario(tmp_path)), "--compare", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    v = json.loads((tmp_path / "out/comparison.json").read_text())["variants"]["oom"]
    assert v["measured"]["hog OOM kills"] == 1 and v["predicted"]["hog OOM kills"] == 1
    assert v["measured"]["hog peak (MiB)"] * MIB <= 64 * MIB + SLACK
    assert v["measured"]["hog memory (MiB)"] < 1  # the killed worker's memory went with it
    assert memory_state(layout) == before  # the run's memory cgroups are gone, our own untouched


def test_a_readers_page_cache_is_squeezed_by_a_writer_under_its_limit_only(layout):
    with Session(memory=True, log=lambda m: None) as s:
        b = s.backend
        b.create(["r", "w"])
        b.write(KnobWrite("r", Knob.MEMORY_LIMIT, 128 * MIB))
        b.write(KnobWrite("w", Knob.MEMORY_LIMIT, 64 * MIB))
        files = cold_files(s.scratch() / "set", 16, 4 * MIB)  # 64 MiB: fits the reader's limit
        assert resident(files) == 0
        assert run(s, ["cat", *map(str, files)], "r") == 0  # read once (stdout: /dev/null)
        cached = resident(files)
        assert cached >= 60 * MIB and b.memory_stats("r")["file"] >= 60 * MIB
        # a writer in a sibling cgroup under its own limit: reclaim stays inside its limit
        out = s.scratch() / "out"
        dd = ["dd", "if=/dev/zero", f"of={out}", f"bs={MIB}", "count=256", "status=none"]
        assert run(s, dd, "w") == 0
        assert resident(files) >= 0.9 * cached
        # the same writer in the reader's cgroup: the limit's reclaim takes the older pages,
        # the reader's
        assert run(s, [*dd[:-1], "conv=notrunc", "status=none"], "r") == 0
        squeezed = resident(files)
        assert squeezed <= 0.5 * cached, (squeezed, cached)
        assert b.memory_stats("r")["current"] <= 128 * MIB + SLACK


def test_colosim_loads_file_reader_tells_a_miss_from_a_hit(tmp_path):
    from replay.workloads import load_command

    files = cold_files(tmp_path / "set", 2, MIB)
    spec = {
        "kind": "file_server",
        "name": "web",
        "cgroup": "a",
        "clients": 1,
        "service": {"dist": "constant", "value_ns": 10_000},
        "working_set_bytes": 2 * MIB,
        "file_bytes": MIB,
    }
    out = tmp_path / "r.json"
    argv = [*load_command(), "--spec", json.dumps(spec), "--duration-ns", "500000000", "--out", str(out), "--files", str(tmp_path / "set")]
    # the independent truth: what the reader fetched from the disk (getrusage ru_inblock, the
    # kernel's per-task read_bytes in 512-byte units, summed over waited-for children)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock
    subprocess.run(argv, check=True, timeout=30)
    disk = (resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock - before) * 512
    doc = json.loads(out.read_text())
    hits = doc["hits"]
    assert len(hits) == doc["completed"] > 100
    # each file's first read finds it dropped (a miss, which brings it in from the disk) ...
    assert hits[:2] == [False, False] and disk >= 2 * MIB
    # ... and every later miss is a read that went to the disk: this host's kernel now and then
    # evicts a few pages of even a hot file (the three misses seen in 10 runs read 8-32 KiB
    # and waited 8-27 ms), and each such miss fetches at least a page. A reader that called
    # cached pages misses (preadv2(RWF_NOWAIT) did: readahead markers) fails this.
    extra = hits.count(False) - 2
    assert extra * 4096 <= disk - 2 * MIB, (extra, disk)
    assert resident(files) >= 2 * MIB - 64 * 4096
