"""What a user gets from `pip install`: the wheel built by maturin, installed into a fresh
virtualenv, works on its own — `colosim`, `colosim-load` (the extension's copy of core_rs/load,
replay/load.py) and a short `colosim calibrate` on the host, run away from the repository with
no COLOSIM_LOAD, so that nothing comes from the source tree.

Slow (a release build, incremental on core_rs/target: seconds when nothing changed, about a
minute after a change to the Rust; the install takes the dependencies from PyPI or pip's
cache). The calibrate part needs what replay's host tests need, and skips elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from host_replay import assert_clean, parent_state, unavailable

from replay.cgroupfs import detect_layout, leftover_folders

REPO = Path(__file__).resolve().parents[1]
MATURIN = next((str(p) for p in (Path(sys.executable).parent / "maturin", shutil.which("maturin")) if p and os.access(p, os.X_OK)), None)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MATURIN is None, reason="maturin is not installed (pip install -e '.[test]')"),
]

HOG = json.dumps({"kind": "hog", "name": "h", "cgroup": "", "threads": 1, "start_ns": 0})
CLOSED = json.dumps(
    {
        "kind": "closed_loop",
        "name": "c",
        "cgroup": "",
        "clients": 2,
        "fanout": 1,
        "think": {"dist": "constant", "value_ns": 0},
        "service": {"dist": "constant", "value_ns": 2_000_000},
        "start_ns": 0,
    }
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "CARGO_TARGET_DIR": str(REPO / "core_rs/target")}
    build = subprocess.run(
        [MATURIN, "build", "--release", "--interpreter", sys.executable, "--out", str(tmp / "dist")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    (wheel,) = (tmp / "dist").glob("colosim-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert pip.returncode == 0, pip.stderr[-4000:]
    return venv


def user_env() -> dict[str, str]:
    """A user's shell, not the test's: no COLOSIM_LOAD, no PYTHONPATH into the repository,
    the venv not activated (its bin not on PATH) and no other venv's bin on it either."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLOSIM_LOAD", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def run(venv: Path, argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]], cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=timeout
    )


def test_the_installed_commands_run_from_the_wheel_alone(venv, tmp_path):
    out = run(venv, ["colosim", "--help"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "calibrate" in out.stdout
    # the packages and the extension are the installed ones
    where = run(venv, ["python", "-c", "import replay.load, sim._core; print(replay.load.__file__, sim._core.__file__)"], tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(Path(f).is_relative_to(venv) for f in where.stdout.split()), where.stdout
    # replay finds the installed script (beside the venv's python: its bin is not on PATH)
    found = run(venv, ["python", "-c", "from replay.workloads import load_command; print(*load_command())"], tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [str(venv / "bin/colosim-load")]
    # colosim-load: a closed loop for 0.3 s, its result as the binary writes it
    load = run(venv, ["colosim-load", "--spec", CLOSED, "--seed", "3", "--duration-ns", "300000000", "--out", "r.json"], tmp_path)
    assert load.returncode == 0, load.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["completed"] == len(doc["latencies_ns"]) == len(doc["completions_ns"]) > 50  # 2 clients x 2 ms over 0.3 s
    assert all(lat >= 2_000_000 for lat in doc["latencies_ns"])
    # and its errors, with the binary's status
    bad = run(venv, ["colosim-load", "--spec", "{}", "--duration-ns", "1"], tmp_path)
    assert bad.returncode == 2 and "colosim-load: error: --spec" in bad.stderr


def test_sigterm_ends_the_installed_colosim_load_at_once(venv, tmp_path):
    """Replay signals colosim-load as it does the binary: SIGTERM ends it mid-run (Python's
    handlers would wait for the Rust call to return, after the whole duration)."""
    import signal
    import time

    proc = subprocess.Popen([str(venv / "bin/colosim-load"), "--spec", HOG, "--duration-ns", "60000000000"], cwd=tmp_path, env=user_env())
    time.sleep(1)
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert time.monotonic() - t < 2


REASON = unavailable()


@pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")
def test_a_short_calibrate_runs_from_the_installed_wheel_and_leaves_no_cgroup(venv, tmp_path):
    layout = detect_layout()
    assert leftover_folders(layout) == [], "a leftover run folder from an earlier run: colosim replay --cleanup"
    before = parent_state(layout)
    # 2 s: the micro-scenarios' warmup is 1 s, so 1 s is measured
    out = run(venv, ["colosim", "calibrate", "--duration", "2", "--out", "cal"], tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "cpu.shares 1024:512" in out.stdout
    doc = json.loads((tmp_path / "cal/calibration.json").read_text())
    # the hogs ran: the shares split measured on the host is a number, not nan
    assert doc["cpu.shares 1024:512"]["CPU a / CPU b"]["host"] > 0
    assert_clean(layout, before)
