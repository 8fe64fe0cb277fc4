"""One variant of a scenario, run for real: its cgroups and knobs, its workloads, its policy
at its interval, and what the host measured, as the same `RunResult` a simulated run gives.

What the host cannot tell us is left as NaN (run-queue wait per cgroup, per-CPU busy time on
cgroup v2, latencies of each request of a real server) rather than guessed.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from policies.cgroup import (
    BLKIO_KNOBS,
    MEMORY_KNOBS,
    NET_KNOBS,
    PRESSURE_KNOBS,
    ROOT_KNOBS,
    SUBSTITUTES,
    CgroupStats,
    Knob,
    KnobWrite,
    Substituting,
    memory_limit_pages,
    memory_refusal,
)
from replay.cgroupfs import PERF_REFUSAL, HostBackend, HostError, WriteRecord, read_disk_stat, read_node_busy_s, resctrl_refusal
from replay.host_kernel import host_kernel, kernel_overrides, parse_version, scheduler_of
from replay.probe import Probe, ProbeResult, Watch
from replay.runqlat import CgroupResolver, RunqLat, RunqLatFigures
from replay.runqlat import available as runqlat_available
from replay.session import Session, raise_if_interrupted
from replay.workloads import HostWorkload, MeasuredService, generator_report
from sim.results import CgroupResult, RunResult, ServiceResult, TimeSeries
from sim.scenario import Cgroup, ClosedLoop, Scenario, Variant

# Knobs of a scenario's [cgroups] table that replay writes, in the order they are written
# (period before quota before burst: the kernel checks burst <= quota at each write), as
# (field, knob, default): the field and its default are the scenario's (sim.scenario.Cgroup).
_REPLAYED = (
    Knob.CPU_SHARES,
    Knob.CPU_IDLE,
    Knob.CPU_QOS_LEVEL,
    Knob.CPU_CFS_PERIOD_US,
    Knob.CPU_CFS_QUOTA_US,
    Knob.CPU_CFS_BURST_US,
    Knob.CPUSET_CPUS,
    Knob.CPUSET_MEMS,
    # blkio (the blkio hierarchy / v2 io controller; throttle rules name the scratch disk)
    Knob.BLKIO_WEIGHT,
    Knob.BLKIO_COST_WEIGHT,
    Knob.BLKIO_READ_BPS,
    Knob.BLKIO_WRITE_BPS,
    Knob.BLKIO_READ_IOPS,
    Knob.BLKIO_WRITE_IOPS,
    # memcg (the memory hierarchy / v2 memory controller): the limit before memory.high,
    # which the scenario keeps at or below it; v1 has only the limit (V1_MEMORY_REFUSALS)
    Knob.MEMORY_LIMIT,
    Knob.MEMORY_HIGH,
    Knob.MEMORY_LOW,
    Knob.MEMORY_MIN,
    Knob.MEMORY_OOM_GROUP,
)
_FIELD = {f.alias: name for name, f in Cgroup.model_fields.items()}
CGROUP_KNOBS = tuple((_FIELD[k.v1], k, Cgroup.model_fields[_FIELD[k.v1]].default) for k in _REPLAYED)


def cgroup_writes(scenario: Scenario) -> list[KnobWrite]:
    """The knob writes that set up a scenario's cgroups (values that differ from a fresh
    cgroup's), parents before children."""
    writes = []
    for path in scenario._cgroup_order():
        cg = scenario.cgroups[path]
        for attr, knob, default in CGROUP_KNOBS:
            value = getattr(cg, attr)
            if value is not None and value != default:
                writes.append(KnobWrite(path, knob, value))
    return writes


def missing_knobs(session: Session) -> set[Knob]:
    """Knobs this host's kernel lacks (probed in the run folder; the read-only pressure
    files are not, nor the blkio knobs unless the run does IO, nor the node-wide and network
    knobs, which replay never writes: replay.cgroupfs.not_replayable says why)."""
    backend = session.backend
    skip = set(PRESSURE_KNOBS) | ROOT_KNOBS | NET_KNOBS
    if not backend.layout.io:
        skip |= BLKIO_KNOBS
    if not backend.layout.memory:
        skip |= MEMORY_KNOBS
    return {k for k in Knob if k not in skip and not backend.has_file("", k)}


def check_resctrl(sc: Scenario) -> None:
    """A scenario that sets resctrl groups, or whose policy writes them or reads perf
    counters, fails before anything runs on a host without resctrl (this one): one message
    (policies/resctrl.py NO_RESCTRL). The scenario's `[resctrl]` tables are the core's."""
    policy = sc.build_policy() if sc.policy is not None else None
    wants = bool(getattr(sc, "resctrl", None)) or (policy is not None and policy.uses_resctrl())
    if wants:
        raise HostError(resctrl_refusal())
    if policy is not None and list(policy.perf_watch()):
        raise HostError(f"the {policy.name} policy reads perf counters of {', '.join(policy.perf_watch())}: {PERF_REFUSAL}")


def check_knobs(scenarios: list[Scenario], missing: set[Knob], say: Callable[[str], Any]) -> set[Knob]:
    """Knobs the host lacks: one with an upstream stand-in is substituted — in the scenario's
    cgroups, in every policy write, and in the prediction — and said once if anything uses
    it; a scenario that sets one without a stand-in fails before anything runs. Returns the
    substituted knobs."""
    for sc in scenarios:
        check_resctrl(sc)
    used = {w.knob for sc in scenarios for w in cgroup_writes(sc)}
    substituted = missing & set(SUBSTITUTES)
    for knob in sorted(substituted, key=lambda k: k.v1):
        if knob in used or any(sc.policy for sc in scenarios):
            stand_in = SUBSTITUTES[knob]
            say(
                f"note: this kernel has no {knob.v1} (openEuler only); replay writes the nearest "
                f"upstream knob instead ({stand_in.v1}=1 for {knob.v1}=-1) and the prediction "
                f"simulates {stand_in.v1} too"
            )
    for knob in sorted(used & missing - substituted, key=lambda k: k.v1):
        if knob in MEMORY_KNOBS:
            where = next(f'cgroups."{w.cgroup}"."{knob.v1}"' for sc in scenarios for w in cgroup_writes(sc) if w.knob is knob)
            raise HostError(memory_refusal(knob, where))
        raise HostError(f"the scenario sets {knob.v1}, which this host's kernel does not have")
    return substituted


def host_equivalent(scenario: Scenario, substituted: set[Knob]) -> Scenario:
    """The scenario as the host runs it: knobs it lacks replaced by their stand-ins, memory
    limits as the kernel holds them (whole pages, policies.cgroup.memory_limit_pages), and a
    service's latencies reported as its host generator prints them (`report`, unless the
    scenario says; sim/reported.py)."""
    paged = any(memory_limit_pages(v) != v for cg in scenario.cgroups.values() for v in (cg.memory_limit, cg.memory_high))
    reports = {
        n: r
        for n, w in scenario.workloads.items()
        if isinstance(w, ClosedLoop) and w.report is None and (r := generator_report(w.host.program))
    }
    if Knob.CPU_QOS_LEVEL not in substituted and not paged and not reports:
        return scenario
    out = scenario.model_copy(deep=True)
    for n, r in reports.items():  # its latencies as the host's generator prints them
        out.workloads[n].report = r  # type: ignore[union-attr]
    for cg in out.cgroups.values():
        cg.memory_limit = memory_limit_pages(cg.memory_limit)
        cg.memory_high = memory_limit_pages(cg.memory_high)
        if Knob.CPU_QOS_LEVEL in substituted and cg.cpu_qos_level == -1:
            cg.cpu_qos_level = 0
            cg.cpu_idle = 1
    return out


def host_topology(cpus, kernel_set: Iterable[str] = ()) -> dict[str, Any]:
    """Overrides that describe this host: `[node]` from /sys/devices/system/cpu, `[kernel]`
    from what the kernel says of itself (replay.host_kernel; the fields the scenario's
    [kernel] names in `kernel_set` keep the scenario's value, but the scheduler)."""
    sockets = len({c.socket for c in cpus})
    cores = len({(c.socket, c.core) for c in cpus})
    threads = len(cpus) // max(1, cores)
    nodes = len({c.node for c in cpus})
    out: dict[str, Any] = {
        "node.sockets": sockets,
        "node.cores_per_socket": cores // sockets,
        "node.threads_per_core": max(1, threads),
        "node.numa_nodes_per_socket": max(1, nodes // sockets),
        **kernel_overrides(host_kernel(), kernel_set),
    }
    return out


def host_scheduler(release: str | None = None) -> str:
    """The fair class a release runs (replay.host_kernel.scheduler_of)."""
    return scheduler_of(parse_version(release or os.uname().release))


@dataclass
class HostRun:
    result: RunResult
    writes: list[WriteRecord] = field(default_factory=list)
    probe: ProbeResult | None = None


def cgroup_probe(backend: HostBackend, cgroups: list[str], hz: float) -> Probe:
    """A probe of every thread in `cgroups` (the workloads' cgroups: their load generators run
    there too), with the run folder's and the root's cfs_rqs from sched/debug."""
    folder, root = backend.cfs_rq_path(""), "/"
    watch = {
        c: Watch(tids=partial(backend.tids, c), percpu=partial(backend.percpu_usage, c), paths=(backend.cfs_rq_path(c), folder, root))
        for c in cgroups
    }
    return Probe(watch, len(backend.cpus()), hz=hz)


def run_on_host(
    variant: Variant,
    seed: int,
    session: Session,
    substituted: set[Knob],
    on_progress: Callable[[float], Any] = lambda s: None,
    probe_hz: float | None = None,
    trace: bool = False,
) -> HostRun:
    """Run one variant for its duration on the host; the run folder is emptied afterwards.
    With `probe_hz`, every thread of the workloads' cgroups is sampled that often
    (replay/probe.py) and the cgroups' run-queue wait, switches and migrations come from it.
    With `probe_hz` or `trace`, the workloads' cgroups are traced where tracefs can be had
    (replay/runqlat.py: wake-to-run delays and run segments, every thread however short-lived),
    and each real server's voluntary switches come from it (`MeasuredService.server_switches`,
    which the calibration's rounds rest on)."""
    sc = variant.scenario
    meta = sc.scenario
    duration, warmup = meta.duration / 1e9, meta.warmup / 1e9
    sample_every = meta.sample_interval / 1e9 if meta.sample_interval else 0.0
    backend = session.backend
    ncpus = len(backend.cpus())
    order = sc._cgroup_order()
    workloads = [HostWorkload(name, w, w.core_spec(name, ncpus), f"workloads.{name}") for name, w in sc.workloads.items() if w.enabled]
    for w in workloads:
        w.check()
    # the scratch disk, when the run does IO
    disk = backend.device if backend.layout.io else None

    first_write = len(backend.log)
    backend.create(order)
    knobs = Substituting(backend, substituted)
    for cw in cgroup_writes(sc):
        knobs.write(cw)

    runner = None
    if sc.policy is not None:
        from policies import PolicyRunner

        runner = PolicyRunner(sc.build_policy(), knobs)

    def snapshot() -> dict[str, Any]:
        # One read of each cgroup's files per sample (cpuacct/cpu.stat, per-CPU usage; the
        # blkio counters and the disk's own when the run does IO).
        if session.dry_run:
            return {"t": time.monotonic(), "stat": {}, "percpu": {}}
        snap = {
            "t": time.monotonic(),
            "node_busy_s": read_node_busy_s(),
            "replay_cpu_s": replay_cpu_s(),
            "stat": {c: backend.stats(c) for c in order},
            "percpu": {c: backend.percpu_usage(c) for c in order},
        }
        if disk is not None:
            snap["io"] = {c: backend.io_stats(c) for c in order}
            snap["disk"] = read_disk_stat(disk)
        if backend.layout.memory:
            snap["memory"] = {c: backend.memory_stats(c) for c in order}
        return snap

    try:
        # dd readers' input files, made before the clock starts
        for w in workloads:
            w.prepare(session)
    except BaseException:
        session.kill_all()  # a server prepare started (PostgreSQL's) holds its cgroup
        for w in workloads:
            w.close()
        backend.remove()
        backend.create([])
        raise
    t0 = time.monotonic()
    backend._t0 = t0
    probe = None
    tracer: ExitStack | None = None
    runqlat: RunqLat | None = None
    watched = list(dict.fromkeys(w.model.cgroup for w in workloads))
    if probe_hz and not session.dry_run:
        probe = cgroup_probe(backend, watched, probe_hz)
        probe.start()
    if (probe_hz or trace) and not session.dry_run:
        # read as raw pages and decoded after the run: a service switching ~10^5 times a
        # second is not disturbed by its own measurement (replay/ftrace_raw.py)
        runqlat, tracer = start_runqlat(backend, watched, session.say)
    probed = None
    traced: dict[str, RunqLatFigures] | None = None
    others_burst: float | None = None
    try:
        for w in workloads:
            w.start(session, t0, duration, warmup, seed)
        next_tick = None
        if runner is not None:
            runner.apply(runner.policy.attach(runner.observe()))
            next_tick = runner.policy.interval
        samples = [snapshot()]
        at_warmup = samples[0] if warmup == 0 else None
        if probe is not None and warmup == 0:
            probe.mark()
            if runqlat is not None:
                runqlat.mark()
        if warmup == 0:
            for w in workloads:
                w.start_generator(session)
        next_sample = sample_every if sample_every else math.inf
        while True:
            now = time.monotonic() - t0
            events = [duration, next_sample, next_tick if next_tick is not None else math.inf]
            if at_warmup is None:
                events.append(warmup)
            target = min(events)
            if target > now and not session.dry_run:
                time.sleep(target - now)
            raise_if_interrupted()
            now = target
            if at_warmup is None and now >= warmup:
                at_warmup = snapshot()
                if probe is not None:
                    probe.mark()
                if runqlat is not None:
                    runqlat.mark()
                for w in workloads:
                    w.start_generator(session)
            if runner is not None and next_tick is not None and now >= next_tick:
                runner.apply(runner.policy.tick(runner.observe()))
                next_tick += runner.policy.interval
            if now >= next_sample:
                samples.append(snapshot())
                next_sample += sample_every
                on_progress(sample_every)
            if now >= duration:
                break
        at_end = snapshot()
        if probe is not None:
            probed, probe = probe.stop(), None
        if runqlat is not None and tracer is not None:
            traced = runqlat.result()
            others_burst = runqlat.acc.others.burst_s()
            tracer.close()
            tracer = None
            if runqlat.abandoned is not None:
                session.say(f"trace: {runqlat.abandoned}; the servers' switches are not measured (the calibration counts the generator's)")
                traced = None
        for w in workloads:
            failure = w.dd_failure()
            if failure:
                raise HostError(failure)
        # Built-in workloads end at the duration and write their results; real load
        # generators finish their last queries. Then everything left is killed.
        for w in workloads:
            w.wait(timeout=t0 + duration + 30 - time.monotonic())
        session.kill_all()
        services = {}
        for w in workloads:
            if w.is_service and not session.dry_run:
                services[w.name] = w.result()
    finally:
        if probe is not None:
            probe.abort()
        if tracer is not None:
            tracer.close()
        session.kill_all()
        for w in workloads:
            w.close()
        backend.remove()
        backend.create([])

    result = _run_result(variant.name, ncpus, duration, warmup, order, at_warmup, at_end, samples, services, session.dry_run)
    if "memory" in at_end:
        result.oom_kills = oom_kills_by_workload(sc, at_end["memory"])
    if runner is not None:
        result.decisions = [d.to_dict() for d in runner.decisions]
    if probed is not None:
        with_probe(result, probed)
    for name, figures in (traced or {}).items():
        if name in result.cgroups:
            result.cgroups[name].runqlat = list(figures.hist)
            result.cgroups[name].segments = figures.segments()
            result.cgroups[name].runnable_us = figures.runnable_us
    if traced is not None:
        result.others_burst_s = others_burst
        lost = max((f.lost for f in traced.values()), default=0)
        with_server_switches(result, sc, {name: f.sleeps for name, f in traced.items()}, lost)
    return HostRun(result, backend.log[first_write:], probed)


def with_server_switches(result: RunResult, sc: Scenario, sleeps: dict[str, int], lost: int = 0) -> None:
    """Each real server's voluntary switches per second over the measured window: `sleeps`,
    its cgroup's threads' switches out asleep (traced: short-lived threads included, which
    /proc's per-thread counters miss) less its load generator's own (wait4's rusage; it runs
    in that cgroup). Only where the service is its cgroup's one workload (another's sleeps
    would be counted as the server's) and the kernel lost no event (`lost`)."""
    per_cgroup = Counter(w.cgroup for w in sc.workloads.values() if w.enabled)
    for name, svc in result.services.items():
        w = sc.workloads[name]
        if not isinstance(svc, MeasuredService) or per_cgroup[w.cgroup] != 1 or w.cgroup not in sleeps:
            continue
        if not (result.measured_s > 0 and math.isfinite(svc.generator_switches)) or lost:
            continue  # a lost event may be a lost sleep: the count would be a lower bound
        slept = sleeps[w.cgroup] / result.measured_s
        svc.server_switches = max(0.0, slept - svc.generator_switches)


def start_runqlat(backend: HostBackend, cgroups: list[str], say: Callable[[str], Any]) -> tuple[RunqLat | None, ExitStack | None]:
    """The host's wake-to-run delays of the workloads' cgroups (replay/runqlat.py), traced
    beside the probe where tracefs can be had; otherwise one line saying why not."""
    why = runqlat_available()
    if why is not None:
        say(f"probe: no wake-to-run delays on this host ({why})")
        return None, None
    keys = backend.keys_for("cpu")
    tracer = RunqLat(CgroupResolver({c: backend.dir(keys, c) for c in cgroups}))
    stack = ExitStack()
    stack.enter_context(tracer)
    return tracer, stack


def with_probe(result: RunResult, probed: ProbeResult) -> None:
    """The probe's run-queue wait, switches and migrations as the cgroups' own (a parent sums its
    probed children), scaled from the probe's window to the run's measured window."""
    scale = result.measured_s / probed.window_s if probed.window_s > 0 else math.nan
    for name, cg in result.cgroups.items():
        mine = [g for c, g in probed.groups.items() if c == name or c.startswith(name + "/")]
        if not mine:
            continue
        cg.wait_s = sum(g.wait_s for g in mine) * scale
        cg.nr_switches = round(sum(g.switches for g in mine) * scale)
        cg.nr_migrations = round(sum(g.migrations for g in mine) * scale) if all(g.migrations >= 0 for g in mine) else -1


_ZERO = CgroupStats(usage_ns=0, nr_periods=0, nr_throttled=0, throttled_ns=0, nr_bursts=0, burst_ns=0, psi_some_ns=0, nr_running=0)


def _run_result(name, ncpus, duration, warmup, order, a, b, samples, services, dry) -> RunResult:
    measured = duration - warmup
    capacity = ncpus * measured
    cgroups = {}
    for c in order:
        # a dry run reads nothing: every counter stays 0
        st0, st1 = (_ZERO, _ZERO) if dry else (a["stat"][c], b["stat"][c])
        cpu_s = (st1.usage_ns - st0.usage_ns) / 1e9
        cgroups[c] = CgroupResult(
            name=c,
            cpu_s=cpu_s,
            cpu_share=cpu_s / capacity if capacity > 0 else math.nan,
            wait_s=math.nan,
            nr_switches=0,
            nr_periods=st1.nr_periods - st0.nr_periods,
            nr_throttled=st1.nr_throttled - st0.nr_throttled,
            throttled_s=(st1.throttled_ns - st0.throttled_ns) / 1e9,
            nr_bursts=st1.nr_bursts - st0.nr_bursts,
            burst_s=(st1.burst_ns - st0.burst_ns) / 1e9,
            psi_some_s=(st1.psi_some_ns - st0.psi_some_ns) / 1e9,
            io=_io_delta(a, b, c) if not dry else None,
            # at the end of the run, events since the cgroup was made (as the simulator's)
            memory=dict(b["memory"][c]) if not dry and "memory" in b else None,
        )
    names = ["", *order]
    leaves = [c for c in order if not any(o.startswith(c + "/") for o in order)]
    busy = np.zeros((ncpus, len(names)))
    for c in leaves:
        i = names.index(c)
        p0, p1 = (a["percpu"].get(c), b["percpu"].get(c)) if not dry else (None, None)
        if p0 and p1 and len(p0) >= ncpus:
            busy[:, i] = (np.asarray(p1[:ncpus]) - np.asarray(p0[:ncpus])) / 1e9
        else:  # cgroup v2 keeps no per-CPU usage: spread it evenly
            busy[:, i] = cgroups[c].cpu_s / ncpus
    return RunResult(
        name=name,
        ncpus=ncpus,
        duration_s=duration,
        warmup_s=warmup,
        services=services,
        cgroups=cgroups,
        cgroup_names=names,
        cpu_busy_s=busy,
        timeseries=_timeseries(samples, ncpus, order, services, dry),
        # the whole disk (everyone's IO on it, this run's and the host's other tenants')
        node_io=_disk_delta(a, b) if not dry else None,
        others_cpu_share=others_share(a, b, cgroups, order, capacity) if not dry else None,
        replay_cpu_share=(b["replay_cpu_s"] - a["replay_cpu_s"]) / capacity if "replay_cpu_s" in a and capacity > 0 else None,
    )


def replay_cpu_s() -> float:
    """This process's CPU so far (every thread's user and system time; not its children's)."""
    t = os.times()
    return t.user + t.system


def oom_kills_by_workload(scenario: Scenario, memory: dict[str, dict[str, int]]) -> dict[str, int]:
    """The OOM kills of each cgroup (its own count: v1's oom_control oom_kill), given to the
    workload that runs there, as the simulator counts the tasks each workload lost; a cgroup
    holding several workloads gives its kills to the first (the host cannot tell whose)."""
    out: dict[str, int] = {}
    given: set[str] = set()
    for name, w in scenario.workloads.items():
        if not w.enabled or w.cgroup in given or w.cgroup not in memory:
            continue
        given.add(w.cgroup)
        kills = memory[w.cgroup].get("events_oom_kill", 0)
        if kills:
            out[name] = kills
    return out


def others_share(a, b, cgroups, order, capacity) -> float | None:
    """The share of the node's capacity busy outside the run's cgroups over the window: the
    node's busy time (/proc/stat) less what the run's top-level cgroups used (their usage
    holds their children's). What disturbs a measurement on a shared host."""
    if "node_busy_s" not in a or "node_busy_s" not in b or capacity <= 0:
        return None
    ours = sum(cgroups[c].cpu_s for c in order if "/" not in c)
    return max(0.0, (b["node_busy_s"] - a["node_busy_s"] - ours) / capacity)


def _io_delta(a, b, c) -> dict[str, Any] | None:
    """A cgroup's IO over the measured window, as the simulator's CgroupResult.io (bytes and
    IOs; the host gives no per-cgroup IO wait time: NaN)."""
    if "io" not in a or "io" not in b:
        return None
    out: dict[str, Any] = {k: b["io"][c][k] - a["io"][c][k] for k in a["io"][c]}
    out["wait_ns"] = math.nan
    return out


def _disk_delta(a, b) -> dict[str, int] | None:
    if "disk" not in a or "disk" not in b:
        return None
    return {k: b["disk"][k] - a["disk"][k] for k in a["disk"]}


def _timeseries(samples, ncpus, order, services: dict[str, ServiceResult], dry) -> TimeSeries:
    if len(samples) < 2 or dry:
        return TimeSeries(
            np.empty(0),
            {c: np.empty(0) for c in order},
            {s: np.empty(0, dtype=np.int64) for s in services},
            {c: np.empty(0, dtype=np.int64) for c in order},
        )
    t = np.array([s["t"] for s in samples]) - samples[0]["t"]
    dt = np.diff(t)
    share = {c: np.diff([s["stat"][c].usage_ns for s in samples]) / 1e9 / (ncpus * dt) for c in order}
    throttled = {c: np.diff([s["stat"][c].nr_throttled for s in samples]).astype(np.int64) for c in order}
    completions = {}
    for name, svc in services.items():
        if len(svc.completions_s):
            completions[name] = np.histogram(svc.completions_s, bins=t)[0].astype(np.int64)
        else:
            completions[name] = np.zeros(len(dt), dtype=np.int64)
    return TimeSeries(t_s=t[1:], cpu_share=share, completions=completions, nr_throttled=throttled)
