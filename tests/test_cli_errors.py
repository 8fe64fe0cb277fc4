"""`colosim run` on bad input: one line `colosim: error: ...` on stderr, exit 2, no traceback.

Every case fails at validation, before the core is touched, so no Rust extension is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GOOD = textwrap.dedent(
    """
    [scenario]
    name = "t"
    duration = "1s"

    [node]
    cores_per_socket = 2

    [cgroups.online]
    [cgroups.offline]

    [workloads.web]
    kind = "open_loop"
    cgroup = "online"
    rate = 100
    workers = 4
    service = { dist = "exponential", mean = "1ms" }
    """
)


def colosim(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLOSIM_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "sim", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_user_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("colosim: error: ")
    for text in expected:
        assert text in lines[0]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("rate = 100", "rate = = 100", ("line 15",)),
        ("rate = 100", "rtae = 100", ("workloads.web.rtae", "unknown field")),
        ("rate = 100", "rate = -5", ("workloads.web.rate", "must be > 0 (got -5)")),
        ("cores_per_socket = 2", "cores_per_socket = 0", ("node.cores_per_socket", ">= 1")),
        ('cgroup = "online"', 'cgroup = "foo"', ("workloads.web.cgroup", 'no cgroup named "foo"')),
    ],
    ids=["malformed-toml", "unknown-field", "negative-rate", "zero-cpus", "undeclared-cgroup"],
)
def test_bad_scenario(tmp_path, old, new, expected):
    assert old in GOOD
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(old, new, 1))
    assert_user_error(colosim("run", str(path), "--no-progress"), *expected)


def test_malformed_toml_names_the_file(tmp_path):
    path = tmp_path / "scenario.toml"
    path.write_text("[scenario]\nname = \n")
    assert_user_error(colosim("run", str(path)), "scenario.toml line 2: ")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    assert_user_error(colosim("run", str(path)), "nope.toml", "no such file")


def test_directory_instead_of_file(tmp_path):
    assert_user_error(colosim("run", str(tmp_path)), "directory")


def test_bad_set_path(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text(GOOD)
    assert_user_error(
        colosim("run", str(path), "--set", "workloads.wbe.rate=5"),
        "--set workloads.wbe.rate",
        'no "wbe"',
    )
    assert_user_error(colosim("run", str(path), "--set", "a..b=1"), "not a dotted key")
    assert_user_error(colosim("run", str(path), "--set", "workloads.web.rate=-1"), "workloads.web.rate")


@pytest.mark.parametrize("error", [KeyError("internal"), ValueError("internal"), TypeError("internal")])
def test_a_bug_is_reported_as_a_bug(tmp_path, monkeypatch, capsys, error):
    # An exception colosim did not mean for the user (here from inside the runner) is never
    # shown as `colosim: error:`: it says it is a bug, where to report it, and the traceback.
    import sim.runner
    from sim.cli import BUG, REPORT_TO, main

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(sim.runner, "run_variant", broken)
    monkeypatch.delenv("COLOSIM_DEBUG", raising=False)
    path = tmp_path / "ok.toml"
    path.write_text(GOOD)
    assert main(["run", str(path), "--no-progress", "--out", str(tmp_path / "o")]) == BUG
    err = capsys.readouterr().err
    assert not err.startswith("colosim: error:")
    first, _, rest = err.partition("\n")
    assert first.startswith("colosim: internal error (a bug in colosim") and REPORT_TO in first
    assert first.endswith(f"): {type(error).__name__}: internal")
    assert rest.startswith("Traceback (most recent call last)")


def test_user_errors_derive_from_one_base():
    from sim.environment import CoreNotBuilt
    from sim.errors import ColosimError, HostError, ScenarioError, SpecRefused, WriteRefused
    from traces.format import TraceError

    for cls in (ScenarioError, SpecRefused, HostError, WriteRefused, TraceError, CoreNotBuilt):
        assert issubclass(cls, ColosimError), cls


def test_a_bad_scenario_in_process_stays_a_user_error(tmp_path, monkeypatch, capsys):
    from sim.cli import USAGE_ERROR, main

    monkeypatch.delenv("COLOSIM_DEBUG", raising=False)
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace("rate = 100", "rate = -5"))
    assert main(["run", str(path), "--no-progress"]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith("colosim: error: workloads.web.rate: must be > 0") and err.count("\n") == 1


@pytest.mark.parametrize("rate", ["0", "-5", "5000"])
def test_replay_probe_rate_out_of_range(tmp_path, rate):
    # checked before anything touches the host (no root, no cgroups needed)
    f = tmp_path / "s.toml"
    f.write_text(GOOD)
    r = colosim("replay", str(f), "--probe", rate)
    assert r.returncode == 2
    assert r.stderr.strip() == f"colosim: error: --probe: the sampling rate must be in (0, 1000] Hz (got {float(rate):g})"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["memcached"], "shape: unknown program 'memcached' (one of clickhouse, nginx, redis, postgres, command)"),
        (["command", "--command", "no-such-program-xyz --port {port}"], "--command: program 'no-such-program-xyz' not found on this host"),
        (["command", "--command", "sleep 1"], "--command: must contain {port}"),
        (["command"], "shape command: give the server with --command"),
        (["nginx", "--clients", "1,x"], "--clients: integers separated by commas"),
        (["nginx", "--duration", "5x"], "--duration: unknown unit 'x'"),
        (["nginx", "--command", "x {port}"], "--command: only for the program `command`"),
    ],
)
def test_shape_bad_input_is_one_line(args, expected):
    # each is refused before anything runs on the host (no root, lock or cgroup needed)
    assert_user_error(colosim("shape", *args), expected)
