"""`kill -9` of `colosim replay` mid-run (nothing of its own cleanup runs), then
`colosim replay --cleanup`: no cgroup, no process and nothing in the file system is left —
the run's directory under TMPDIR (the servers' data, colosim-load's reports, dd's scratch
files) found by its record even when the cleanup runs with another TMPDIR. Needs what
tests/test_replay_host.py needs (the IO case what tests/test_replay_io_host.py needs)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from host_replay import unavailable
from test_replay_host import _host_reason, parent_state
from test_tune_kill import gone, marked

from replay.cgroupfs import block_device, detect_layout, leftover_folders
from replay.session import RUNS_DIR, SCRATCH_PREFIX
from sim.errors import HostError

REASON = unavailable() or _host_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")
COLOSIM = [sys.executable, "-m", "sim"]


def _is_load(process: str) -> bool:
    """Whether a `marked` line (PID (STATE) CMDLINE) is colosim-load, in any form it starts."""
    return "colosim-load" in process or "-m replay.load" in process


def _io_reason() -> str | None:
    reason = unavailable(io=True)
    if reason is None:
        try:
            block_device(tempfile.gettempdir())
        except HostError as err:
            reason = str(err)
    return reason


HEAD = """
[scenario]
name = "killed"
duration = "120s"
warmup = "1s"
"""
CPU = """
[cgroups.a]
"cpu.shares" = 1024
[workloads.ha]
kind = "hog"
cgroup = "a"
threads = 1
"""
# one writer held at 4 MB/s: light on a shared disk, and its scratch file is there at once
IO = """
[cgroups.b]
"blkio.throttle.write_bps_device" = 4000000
[workloads.dw]
kind = "dd"
cgroup = "b"
"""


@pytest.mark.parametrize("kind", ["cpu", "io"])
def test_cleanup_after_kill_9_leaves_no_cgroup_process_or_file(tmp_path, kind):
    if kind == "io" and (why := _io_reason()):
        pytest.skip(f"host IO replay unavailable: {why}")
    layout = detect_layout(io=None)
    if leftover_folders(layout):
        pytest.skip("a run folder of another replay is under our cgroup (another test runs one)")
    before = parent_state(layout)
    scenario = tmp_path / "killed.toml"
    scenario.write_text(HEAD + CPU + (IO if kind == "io" else ""))
    # a TMPDIR of its own (on the same disk): the cleanup below runs without it
    tmp = Path(tempfile.mkdtemp(prefix="replay-kill-", dir=tempfile.gettempdir()))
    token = secrets.token_hex(8)
    env = {**os.environ, "TMPDIR": str(tmp), "COLOSIM_TEST_MARK": token}
    want = ["ha-"] + (["io/dw/dd-0"] if kind == "io" else [])
    try:
        deadline = time.monotonic() + 120
        while True:  # another test's replay may hold the host's replay lock for a while
            log = tmp_path / "replay.log"
            with log.open("w") as f:
                proc = subprocess.Popen([*COLOSIM, "replay", str(scenario)], env=env, stdout=f, stderr=subprocess.STDOUT)
            run_dir = None
            while time.monotonic() < deadline and proc.poll() is None:
                dirs = list(tmp.glob(SCRATCH_PREFIX + "*"))
                # (the hog exec'd: a forked child of the replay carries the mark before it is one)
                if dirs and all(any(dirs[0].glob(w + "*")) for w in want) and any(_is_load(p) for p in marked(token)):
                    run_dir = dirs[0]
                    break
                time.sleep(0.05)
            if run_dir is not None:
                break
            proc.wait(timeout=30)
            if "another replay is running" in log.read_text() and time.monotonic() < deadline:
                time.sleep(2)
                continue
            pytest.fail(f"the replay never got under way: {log.read_text()[-2000:]}")
        # a process outside the run's cgroups using its directory (as dd preparing a reader's
        # file, before the run, does)
        holder = subprocess.Popen(["sleep", "600"], cwd=next(run_dir.glob("ha-*")), env=env)
        # Popen returns when exec closes its close-on-exec pipe, before the new image's
        # environment is in place (/proc/PID/environ reads empty until then): wait for it
        ready = time.monotonic() + 10
        while not any(p.startswith(f"{holder.pid} ") for p in marked(token)) and time.monotonic() < ready:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        run_id = run_dir.name[len(SCRATCH_PREFIX) :]
        # what the kill left: the directory, the cgroups, the record, the workloads
        assert run_dir.is_dir() and (RUNS_DIR / f"{run_id}.json").is_file()
        assert {f.name for f in leftover_folders(layout)} == {f"colosim-{run_id}"}
        assert len(marked(token)) >= 2, "the workloads outlive the killed replay (until --cleanup)"

        clean_env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
        done = subprocess.run([*COLOSIM, "replay", "--cleanup"], env=clean_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        said = done.stderr
        assert f"removed {run_dir} (run {run_id}: " in said and "killed 1 process using it" in said, said
        assert f"colosim-{run_id} (" in said  # its cgroups
        assert holder.wait(timeout=10) == -signal.SIGKILL
        assert not run_dir.exists() and not (RUNS_DIR / f"{run_id}.json").exists()
        assert leftover_folders(layout) == []
        assert gone(token) == [], "processes of the killed replay still run"
        assert parent_state(layout) == before
        # and again: nothing of it is left to clean
        again = subprocess.run([*COLOSIM, "replay", "--cleanup"], env=clean_env, capture_output=True, text=True, timeout=60)
        assert run_id not in again.stderr
    finally:
        for pid in marked(token):  # whatever a failed assertion left (ours by the marker)
            try:
                os.kill(int(pid.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run([*COLOSIM, "replay", "--cleanup"], capture_output=True, timeout=60, env={**os.environ, "TMPDIR": str(tmp)})
        subprocess.run(["rm", "-rf", str(tmp)])
