"""Custom EEVDF slices on this host (`[workloads.X] sched_runtime_ns`, Linux 6.12+): what the
mechanism promises, read back from the kernel — never a latency ordering on a busy machine.

* /proc/PID/task/TID/sched shows each thread's `se.slice` (kernel/sched/debug.c
  proc_sched_show_task, `P(se.slice)`), which sched_setattr sets to the requested value
  (syscalls.c `__setparam_fair`).
* Every thread and child process of a task with a custom slice has it too: `__sched_fork`
  leaves se.slice as `dup_task_struct` copied it (6.12+), and exec keeps it
  (core_rs/load/src/slice.rs) — so colosim-load's threads, started after it set its own
  slice, and a server exec'd by the wrapper, with its forked workers, all show it.
* A workload without a slice keeps the base slice (this test process's own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from host_replay import unavailable

from replay import custom_slice
from replay.cgroupfs import detect_layout, leftover_folders
from replay.host_kernel import parse_version
from sim.errors import HostError


def _reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "needs Linux"
    if parse_version(os.uname().release) < custom_slice.FIRST_RELEASE:
        return f"Linux {os.uname().release} has no custom slices (6.12+)"
    from replay.workloads import load_command

    try:
        load_command()
    except HostError as err:
        return str(err)
    return unavailable()


REASON = _reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")

COLOSIM = [sys.executable, "-m", "sim"]
SLICE_NS = 300_000


def slice_of(path: Path) -> int:
    """se.slice of a task's /proc/.../sched."""
    for line in path.read_text().splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    raise AssertionError(f"{path}: no se.slice line")


def base_slice() -> int:
    return slice_of(Path("/proc/self/sched"))


def run_folder(pid: str, name: str) -> str | None:
    """The replay run folder (colosim-RUN) whose cpu cgroup `name` holds process `pid`, if one does."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        parts = path.split("/")
        if ("cpu" in controllers.split(",") or controllers == "") and len(parts) >= 2 and parts[-1] == name:
            if parts[-2].startswith("colosim-"):
                return parts[-2]
    return None


def threads_of(name: str, folders: set[str] | None = None) -> dict[str, tuple[str, int]]:
    """Every thread of every process in a run's cgroup `name`: "pid/tid" -> (its comm, its
    se.slice); the run folders they were in are added to `folders`."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            folder = run_folder(d.name, name)
            if folder is None:
                continue
            if folders is not None:
                folders.add(folder)
            for t in (d / "task").iterdir():
                out[f"{d.name}/{t.name}"] = ((t / "comm").read_text().strip(), slice_of(t / "sched"))
        except (OSError, ValueError):
            continue  # it exited meanwhile
    return out


def replay_and_sample(
    tmp_path: Path, text: str, cgroups: list[str], want: dict[str, int], comms: dict[str, set[str]] | None = None
) -> dict[str, dict[str, tuple[str, int]]]:
    """Replay the scenario `text`; once every cgroup in `cgroups` has at least want[cg]
    threads, among them threads named each of comms[cg] (a launcher not yet exec'd into its
    program counts as a thread too: a CI beside stress saw colosim-load's python before wrk),
    their threads and slices."""
    # other runs' folders may come and go on a shared machine (another checkout's tests): this
    # run must leave none of its own
    layout = detect_layout()
    mine: set[str] = set()
    path = tmp_path / "slice.toml"
    path.write_text(text)
    proc = subprocess.Popen([*COLOSIM, "replay", str(path), "--out", str(tmp_path / "o")], stderr=subprocess.PIPE, text=True)
    seen: dict[str, dict[str, tuple[str, int]]] = {}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            seen = {cg: threads_of(cg, mine) for cg in cgroups}
            named = {cg: {c for c, _ in seen[cg].values()} for cg in cgroups}
            if all(len(seen[cg]) >= want[cg] and (comms or {}).get(cg, set()) <= named[cg] for cg in cgroups):
                break
            time.sleep(0.2)
    finally:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(mine) == 1, mine  # one run: ours
    assert [p for p in leftover_folders(layout) if p.name in mine] == []
    assert all(threads_of(cg) == {} for cg in cgroups)  # its workloads ended with it
    for cg in cgroups:
        assert len(seen.get(cg, {})) >= want[cg], f"{cg}: saw {seen.get(cg)} while the run lasted"
    return seen


def test_colosim_loads_threads_take_the_workloads_slice_and_others_keep_the_base(tmp_path):
    # an open loop: colosim-load's main thread (arrivals), its deadline thread and 2 workers,
    # all started after it set its slice; a hog without a slice beside it
    seen = replay_and_sample(
        tmp_path,
        f"""
[scenario]
name = "slice"
duration = "4s"
warmup = "1s"
[cgroups.sliced]
[cgroups.plain]
[workloads.web]
kind = "open_loop"
cgroup = "sliced"
rate = 200
workers = 2
service = "0.2ms"
sched_runtime_ns = {SLICE_NS}
[workloads.hog]
kind = "hog"
cgroup = "plain"
threads = 1
""",
        ["sliced", "plain"],
        {"sliced": 4, "plain": 3},
    )
    assert {s for _, s in seen["sliced"].values()} == {SLICE_NS}, seen["sliced"]
    assert {s for _, s in seen["plain"].values()} == {base_slice()}, seen["plain"]


@pytest.mark.skipif(shutil.which("nginx") is None or shutil.which("wrk") is None, reason="nginx or wrk not installed (make host-packages)")
def test_a_real_server_its_forked_workers_and_its_generator_take_the_slice(tmp_path):
    # nginx under the wrapper: its master exec'd by colosim-load, its workers forked by the
    # master (one per CPU), wrk (the generator, same cgroup) with its threads
    ncpus = len(os.sched_getaffinity(0))
    seen = replay_and_sample(
        tmp_path,
        f"""
[scenario]
name = "slice"
duration = "5s"
warmup = "1s"
[cgroups.sliced]
[workloads.web]
kind = "closed_loop"
cgroup = "sliced"
clients = 2
service = "1ms"
host = "nginx"
sched_runtime_ns = {SLICE_NS}
""",
        ["sliced"],
        {"sliced": 1 + ncpus + 1},
        {"sliced": {"nginx", "wrk"}},
    )
    comms = [c for c, _ in seen["sliced"].values()]
    assert comms.count("nginx") >= 1 + ncpus, comms  # master + workers
    assert "wrk" in comms, comms
    assert {s for _, s in seen["sliced"].values()} == {SLICE_NS}, seen["sliced"]


def test_the_wrapper_sets_the_slice_that_children_and_exec_keep():
    # no replay: the wrapper execs a shell that reports its own slice and a forked child's
    from replay.workloads import load_command

    script = 'grep se.slice /proc/$$/sched; sh -c "grep se.slice /proc/\\$\\$/sched"'
    out = subprocess.run(custom_slice.wrap(["sh", "-c", script], SLICE_NS, load_command()), capture_output=True, text=True, check=True)
    assert [int(line.split(":")[1]) for line in out.stdout.splitlines()] == [SLICE_NS, SLICE_NS]
    # nice(2) and sched_setscheduler(2) keep it: _sched_setscheduler copies se.slice into its
    # attr when custom_slice is set (syscalls.c), set_user_nice does not touch it
    keep = (
        "import os, re; f = lambda: int(re.search(r'se.slice\\s*:\\s*(\\d+)', open('/proc/self/sched').read())[1]); a = f(); "
        "os.nice(1); b = f(); os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)); print(a, b, f())"
    )
    out = subprocess.run(
        custom_slice.wrap([sys.executable, "-c", keep], SLICE_NS, load_command()), capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [str(SLICE_NS)] * 3
    # the kernel clamps (syscalls.c: NSEC_PER_MSEC/10 .. NSEC_PER_MSEC*100); colosim-load
    # checks the read-back against the same clamp, so 1 ns becomes 0.1 ms without an error
    out = subprocess.run(custom_slice.wrap(["sh", "-c", "grep se.slice /proc/$$/sched"], 1, load_command()), capture_output=True, text=True)
    assert out.returncode == 0 and int(out.stdout.split(":")[1]) == 100_000


@pytest.mark.skipif(os.geteuid() != 0, reason="chrt -f needs root")
def test_a_task_the_kernel_gives_no_fair_slice_is_refused_naming_workload_and_value():
    # under SCHED_FIFO a task has no EEVDF slice: colosim-load refuses rather than switching
    # its policy, and replay's check says which workload and value
    from replay.workloads import load_command

    with pytest.raises(HostError) as e:
        custom_slice.check("workloads.web", SLICE_NS, ["chrt", "-f", "1", *load_command()])
    text = str(e.value)
    assert "workloads.web.sched_runtime_ns = 300000" in text and "not a fair one" in text


def test_check_passes_on_this_host():
    from replay.workloads import load_command

    custom_slice.check("workloads.web", SLICE_NS, load_command())  # raises if the host refuses
