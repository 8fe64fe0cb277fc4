"""`colosim record`: the arithmetic on fake cgroup files (v1 and v2), and on this host a real
cgroup with one busy process in it, which the trace shows using about one core."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from traces.format import TraceError, read
from traces.recorder import Source, mounts, record, source

MOUNTS = """cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0
"""


def test_mounts_and_sources(tmp_path):
    m = mounts(MOUNTS)
    assert m == {
        "cpuacct": Path("/sys/fs/cgroup/cpuacct"),
        "memory": Path("/sys/fs/cgroup/memory"),
        "unified": Path("/sys/fs/cgroup/unified"),
    }
    (tmp_path / "acct" / "a").mkdir(parents=True)
    (tmp_path / "acct" / "a" / "cpuacct.usage").write_text("0\n")
    s = source("/a=offline", {"cpuacct": tmp_path / "acct", "memory": tmp_path / "mem"})
    assert (s.name, s.role, s.cpu_file.name) == ("/a", "offline", "cpuacct.usage")
    with pytest.raises(TraceError, match="--cgroup /nope: no such cgroup"):
        source("/nope", {"cpuacct": tmp_path / "acct"})
    with pytest.raises(TraceError, match="role must be one of"):
        source("/a=gold", {"cpuacct": tmp_path / "acct"})


def test_cores_from_usage_counters_v1_and_v2(tmp_path):
    """A fake clock: 1.5 s of CPU per 1 s interval is 1.5 cores; v2 counts µs."""
    v1 = tmp_path / "cpuacct.usage"
    v2 = tmp_path / "cpu.stat"
    mem = tmp_path / "memory.current"
    mem.write_text("1048576\n")
    now = [0.0]
    usage = [0.0]

    def sleep(dt):
        now[0] += dt
        usage[0] += 1.5 * dt
        v1.write_text(f"{int(usage[0] * 1e9)}\n")
        v2.write_text(f"usage_usec {int(usage[0] * 1e6)}\nuser_usec 0\n")

    sleep(0)
    tr = record([Source("/a", "online", v1, 1.0, None), Source("/b", "offline", v2, 1000.0, mem)], 1.0, 4.0, sleep, lambda: now[0])
    a, b = tr.entities["/a"], tr.entities["/b"]
    assert a.t_s.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert a.cpu_cores.tolist() == pytest.approx([1.5] * 4) and b.cpu_cores.tolist() == pytest.approx([1.5] * 4)
    assert a.memory_bytes is None and b.memory_bytes.tolist() == [1048576.0] * 4
    with pytest.raises(TraceError, match="--interval must be > 0"):
        record([], 0, 1)


def _own(controller: str) -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            return path
    return None


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_busy_process_records_what_it_got(tmp_path):
    m = mounts()
    own = _own("cpuacct")
    if os.geteuid() != 0 or "cpuacct" not in m or own is None:
        pytest.skip("needs root and cgroup v1 cpuacct")
    d = m["cpuacct"] / own.lstrip("/") / f"colosim-rec-{os.getpid()}"
    try:
        d.mkdir()
    except OSError as err:
        pytest.skip(f"cannot create a cgroup here: {err}")
    # PR_SET_PDEATHSIG (prctl(2) option 1): the loop dies with this test's process, so a killed
    # test run leaves no busy loop behind in the cgroup
    loop = "import ctypes, signal; ctypes.CDLL(None).prctl(1, signal.SIGKILL)\nwhile True: pass"
    busy = subprocess.Popen([sys.executable, "-c", loop])
    try:
        (d / "cgroup.procs").write_text(str(busy.pid))
        out = tmp_path / "rec.parquet"
        rel = "/" + str(d.relative_to(m["cpuacct"]))
        # The process's own CPU clock, read every 0.1 s while the recorder runs: the recorder's
        # 3 s window lies somewhere inside (after its interpreter's start-up, which on a busy
        # machine takes a while), so the truth is the range of what the process got over any
        # 3 s of the run, not the whole run's average.
        clock: list[tuple[float, float]] = []
        rec = subprocess.Popen(
            [sys.executable, "-m", "sim", "record", "--cgroup", rel, "--interval", "0.5s", "--duration", "3s", "-o", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while rec.poll() is None:
            clock.append((time.monotonic(), _cpu_s(busy.pid)))
            time.sleep(0.1)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
        rates = [(c1 - c0) / (t1 - t0) for i, (t0, c0) in enumerate(clock) for t1, c1 in clock[i + 1 :] if 2.9 <= t1 - t0 <= 3.3]
        assert rates, "the recorder ran for less than its 3 s"
        e = read(out).entities[rel]
        got = e.cpu_cores.mean()
        # The recording says what the process got: a whole core on an idle machine, less
        # beside other work, never more.
        print(f"recorded {got:.3f} cores; the process's own clock over any 3 s of the run: {min(rates):.3f}-{max(rates):.3f}")
        assert len(e) == 6 and min(rates) * 0.9 <= got <= max(rates) * 1.1
        assert e.cpu_cores.max() <= 1.05
    finally:
        busy.kill()
        busy.wait()
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.05)
    assert not d.exists()
