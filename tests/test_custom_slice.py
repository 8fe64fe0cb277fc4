"""EEVDF custom slices (`[workloads.x] sched_runtime_ns`, Linux 6.12+) through the scenario
path: a latency-sensitive service with a 0.3 ms slice beside a CPU hog on one CPU gets a
lower P99 than with the base slice, by what fair.c's arithmetic says, and bad values are
refused naming the field.

The arithmetic (one CPU, HZ 1000, base_slice 0.7 ms: one CPU scales it by 1): the service's
group entity wakes beside the hog group's entity, which is alone on the root queue and keeps
renewing its deadline at each tick, so at a wakeup τ after a tick the hog's deadline is
v − τ + 0.7 ms and the service's V − 2·lag + slice (place_entity with lag credit, equal
weights). The service preempts at once when its deadline is earlier (`pick_eevdf`; with a
shorter slice PREEMPT_SHORT ignores the hog's protection); otherwise it waits for the next
tick, where the hog's renewed slice reschedules it. So every wait is at most
tick − (base_slice − slice): 1 ms with the base slice, 0.6 ms with 0.3 ms — a P99 that drops
by about base_slice − slice = 0.4 ms. (EEVDF's lag keeps the mean wait near the service time
either way: what the service waits it gets back as lag credit.)
"""

from __future__ import annotations

from pathlib import Path

import beside_hog
import pytest

from replay import custom_slice
from replay.cgroupfs import HostError
from replay.workloads import HostWorkload
from sim import load_scenario, run_scenario
from sim.errors import ScenarioError

pytest.importorskip("sim._core")

SERVICE_MS = 0.05
TICK_MS = 1.0
BASE_MS = 0.7


def scenario(tmp_path: Path, runtime_line: str, version: str = "6.18") -> Path:
    kernel = f'version = "{version}"\nhz = 1000'
    return beside_hog.write(
        tmp_path, name="slice", duration="20s", cpus=1, kernel=kernel, rate=200, service=f"{SERVICE_MS}ms", hogs=1, web_extra=runtime_line
    )


def p99_ms(tmp_path: Path, runtime_line: str) -> float:
    svc = beside_hog.run(scenario(tmp_path, runtime_line)).services["web"]
    assert svc.completed > 3000
    return float(svc.p99_s) * 1e3


def test_a_short_slice_service_beside_a_hog_gets_a_lower_p99_by_the_slice_difference(tmp_path: Path) -> None:
    base = p99_ms(tmp_path, "")
    short = p99_ms(tmp_path, "sched_runtime_ns = 300000")
    # every wait bounded as the arithmetic says (plus the service's own CPU)
    assert base <= SERVICE_MS + TICK_MS + 0.01
    assert short <= SERVICE_MS + TICK_MS - (BASE_MS - 0.3) + 0.01
    # the tails are made of such waits: within 10% of a tick of their bounds
    assert base >= SERVICE_MS + TICK_MS - 0.1
    assert short >= SERVICE_MS + TICK_MS - (BASE_MS - 0.3) - 0.1
    # so the drop is about base_slice - slice
    assert base - short == pytest.approx(BASE_MS - 0.3, abs=0.1)
    # sched_runtime_ns = 0 is the base slice
    assert p99_ms(tmp_path, "sched_runtime_ns = 0") == base


@pytest.mark.parametrize(
    ("line", "version", "needle"),
    [
        ("sched_runtime_ns = 99999", "6.18", "must be 0 (base_slice) or in [100000, 100000000]"),
        ("sched_runtime_ns = 100000001", "6.18", "must be 0 (base_slice) or in [100000, 100000000]"),
        ("sched_runtime_ns = 300000", "6.6", "6.12 or later"),
    ],
)
def test_bad_slices_are_refused_naming_the_field(tmp_path: Path, line: str, version: str, needle: str) -> None:
    with pytest.raises(ScenarioError) as e:
        run_scenario(load_scenario(scenario(tmp_path, line, version)), progress=False)
    text = str(e.value)
    assert "sched_runtime_ns" in text and "web" in text and needle in text
    assert "Traceback" not in text


def test_replay_refuses_a_kernel_without_custom_slices_naming_workload_and_value() -> None:
    # 6.6 - 6.11 ignore sched_runtime for SCHED_OTHER without an error (no custom_slice before
    # commit 857b158dc5e8): replay must say so rather than run a different experiment
    with pytest.raises(HostError) as e:
        custom_slice.check("workloads.web", 300000, ["colosim-load-never-run"], release="6.11.9-generic")
    text = str(e.value)
    assert "workloads.web.sched_runtime_ns = 300000" in text and "Linux 6.11.9-generic" in text and "6.12 or later" in text


def test_replay_passes_on_what_colosim_load_says_when_the_host_refuses_the_slice(tmp_path: Path, monkeypatch) -> None:
    # colosim-load's own message (exit 3) reaches the user once, behind the workload and the
    # value, without a traceback: a stand-in that refuses as sched_setattr's EPERM would
    fake = tmp_path / "colosim-load"
    fake.write_text(
        "#!/bin/sh\necho 'colosim-load: error: --slice-ns 300000: sched_setattr(sched_runtime = 300000) failed: EPERM' >&2\nexit 3\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("COLOSIM_LOAD", str(fake))
    sc = load_scenario(scenario(tmp_path, "sched_runtime_ns = 300000"))
    w = sc.workloads["web"]
    with pytest.raises(HostError) as e:
        HostWorkload("web", w, w.core_spec("web", 1), "workloads.web").check()
    text = str(e.value)
    assert text.startswith("workloads.web.sched_runtime_ns = 300000: the host refused the slice: ")
    assert text.endswith("sched_setattr(sched_runtime = 300000) failed: EPERM") and "colosim-load: error" not in text


def test_replay_wraps_every_program_of_a_sliced_workload_and_no_other() -> None:
    # the session a sliced workload spawns through prefixes the wrapper; the rest passes through
    calls: list[tuple[list[str], str]] = []

    class Recorder:
        dry_run = True

        def spawn(self, argv, cgroup, **kw):
            calls.append((list(argv), cgroup))

    sliced = custom_slice.SlicedSession(Recorder(), 300000, ["LOAD"])
    sliced.spawn(["nginx", "-c", "x"], "ls")
    assert calls == [(["LOAD", "--slice-ns", "300000", "--", "nginx", "-c", "x"], "ls")]
    assert sliced.dry_run is True
