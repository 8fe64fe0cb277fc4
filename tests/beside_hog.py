"""One latency-sensitive open loop (`web` in `ls`) beside CPU hogs (`stress` in `be`): the
scenario the wakeup-preemption tests share (test_custom_slice.py, test_requeue_delayed.py,
test_runqlat_sim.py), written to a file and run once."""

from __future__ import annotations

from pathlib import Path

from sim import load_scenario, run_scenario
from sim.results import RunResult


def write(
    tmp_path: Path,
    *,
    name: str,
    duration: str,
    cpus: int,
    kernel: str,
    rate: int,
    service: str,
    hogs: int,
    web_extra: str = "",
    hog_extra: str = "",
) -> Path:
    """`kernel`: the [kernel] lines after `scheduler = "eevdf"`; `service`: a constant's value
    ("50us"); `web_extra`/`hog_extra`: lines added to either workload."""
    text = f"""
[scenario]
name = "{name}"
duration = "{duration}"
warmup = "1s"
seed = 3

[node]
cores_per_socket = {cpus}

[kernel]
scheduler = "eevdf"
{kernel}

[cgroups.ls]
[cgroups.be]

[workloads.web]
kind = "open_loop"
cgroup = "ls"
rate = {rate}
workers = 1
service = {{ dist = "constant", value = "{service}" }}
{web_extra}

[workloads.stress]
kind = "hog"
cgroup = "be"
threads = {hogs}
{hog_extra}
"""
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def run(path: Path) -> RunResult:
    """The scenario's one run."""
    (result,) = run_scenario(load_scenario(path), progress=False).runs.values()
    return result
