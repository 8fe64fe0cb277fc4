"""`colosim replay`: a scenario on this host, and (with --compare) beside the simulator.

The prediction is made for *this* host: the node's topology is read from /sys, knobs the
kernel lacks are replaced by their stand-ins in both runs, and each service's model is
calibrated on the host first — the online workload runs alone, and its model is fitted to the
whole alone run (replay/calibration.py): the service distribution to QPS and P50/P90/P99
jointly, the load generator's own CPU per request, and the gaps the real service leaves on
its CPUs; the fit's residuals are printed, and a poor fit is said. Then every variant runs on the host and in the simulator, same seed, same
duration, and the table sets measured beside predicted with the error of each.

A scenario that does block IO (dd workloads, blkio knobs) also runs in the blkio hierarchy
(v2: the io controller), and the prediction describes this host's disk: [node.disk].scheduler
is the scratch disk's (/sys/block/<dev>/queue/scheduler) and wbps / rbps are calibrated by a
short solo direct dd (1 MiB blocks) before the runs, fitted so that the simulator's solo dd
moves what the host's did. Network limits do not replay here (replay.cgroupfs.network_refusal).

A scenario that limits or uses memory (memory knobs, memory workloads, [node] memory) also runs
in the memory hierarchy (v2: the memory controller), and the prediction describes this host's
memory: [node] memory and swap are /proc/meminfo's MemTotal and SwapTotal. cgroup v1 has only
memory.limit_in_bytes of the simulator's memcg knobs; the others are refused with the stand-in
the kernel lacks (policies.cgroup.V1_MEMORY_REFUSALS). The table sets each memory workload's
cgroup usage, page cache and OOM kills, and a file server's hit ratio, beside the prediction.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies.cgroup import BLKIO_KNOBS, MEMORY_KNOBS, Knob
from replay.background import background_cpus, with_background
from replay.calibration import AloneRun, Fit, apply_fit, calibration_doc, fit_service, shortened, simulator_of
from replay.cgroupfs import BlockDevice, HostError, host_cpus, network_refusal, read_meminfo
from replay.host_kernel import host_kernel
from replay.host_run import CGROUP_KNOBS, HostRun, check_knobs, host_equivalent, host_topology, missing_knobs, run_on_host
from replay.session import Session
from replay.timer_slack import TimerOvershoot, any_timed, timer_equivalent
from replay.timer_slack import measure as measure_timer
from replay.workloads import generator_event_loop, generator_threads
from sim import runqlat
from sim.regimes import batch_share
from sim.results import ExperimentResult, RunResult, finite, markdown, sig3
from sim.scenario import (
    IO_KINDS,
    MEMORY_KINDS,
    ClosedLoop,
    Lognormal,
    OpenLoop,
    Scenario,
    Variant,
    load_scenario,
    read_document,
)
from sim.scenario.distributions import mean_s
from sim.scenario.workloads import ROOT_CGROUP, EventLoop

# the solo dd that calibrates the disk: how long it is measured, after how long, its block
DISK_CALIBRATION_S = 1.5
DISK_CALIBRATION_SETTLE_S = 0.3
DISK_CALIBRATION_BLOCK = 1 << 20
# the scenario's blkio knobs, with the defaults replay leaves unwritten
BLKIO_DEFAULTS = {attr: default for attr, knob, default in CGROUP_KNOBS if knob in BLKIO_KNOBS}
MEMORY_DEFAULTS = {attr: default for attr, knob, default in CGROUP_KNOBS if knob in MEMORY_KNOBS}


def load_for_host(path: Path, overrides: list[str] | dict[str, Any], disk: dict[str, Any] | None = None) -> Scenario:
    """The scenario with this host's topology, and its disk if given (user overrides still win)."""
    from sim.overrides import combine

    topo = host_topology(host_cpus(), (read_document(path).get("kernel") or {}).keys())
    if disk is None and _document_does_io(read_document(path)):
        # the scratch disk's scheduler until host_disk calibrates the rest (a scenario that
        # does IO may leave [node.disk] out: replay describes this host's)
        import tempfile

        from replay.cgroupfs import block_device

        disk = {"scheduler": block_device(tempfile.gettempdir()).scheduler}
    if disk:
        topo["node.disk"] = _disk_table(disk)
    if _document_uses_memory(read_document(path)):
        topo.update(host_memory())
        topo["kernel.memcg_v1"] = _host_memcg_v1()
    return load_scenario(path, combine(topo, overrides))


def host_memory(meminfo: str | None = None) -> dict[str, int]:
    """`[node]` memory and swap of this host (/proc/meminfo MemTotal, SwapTotal; bytes)."""
    if meminfo is None:
        meminfo = Path("/proc/meminfo").read_text()
    swap = next((int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("SwapTotal:")), 0)
    return {"node.memory": read_meminfo(meminfo)["mem_total"], "node.swap": swap}


def _host_memcg_v1() -> bool:
    """Whether replay's memory cgroups here are cgroup v1's (legacy memcg: limit reclaim waits
    on writeback, mm/vmscan.c writeback_throttling_sane); False where there is none."""
    from replay.cgroupfs import detect_layout

    try:
        return detect_layout(memory=None).version == 1
    except HostError:
        return False


def _document_uses_memory(doc: dict[str, Any]) -> bool:
    if (doc.get("node") or {}).get("memory") is not None:
        return True
    workloads = doc.get("workloads") or {}
    if any(isinstance(w, dict) and w.get("kind") in MEMORY_KINDS for w in workloads.values()):
        return True
    return any(isinstance(cg, dict) and any(str(k).startswith("memory.") for k in cg) for cg in (doc.get("cgroups") or {}).values())


def _document_does_io(doc: dict[str, Any]) -> bool:
    workloads = doc.get("workloads") or {}
    if any(isinstance(w, dict) and w.get("kind") in IO_KINDS for w in workloads.values()):
        return True
    return any(isinstance(cg, dict) and any(str(k).startswith("blkio.") for k in cg) for cg in (doc.get("cgroups") or {}).values())


def uses_io(variants: list[Variant]) -> bool:
    """Whether any run does block IO (an IO workload or a blkio knob off its default)."""
    for v in variants:
        if any(w.enabled and w.kind in IO_KINDS for w in v.scenario.workloads.values()):
            return True
        for cg in v.scenario.cgroups.values():
            if any(getattr(cg, a) != d for a, d in BLKIO_DEFAULTS.items()):
                return True
    return False


def uses_memory(variants: list[Variant]) -> bool:
    """Whether any run limits or measures memory: [node] memory modelled (which memory
    workloads need), or a memcg knob off its default."""
    for v in variants:
        if v.scenario.node.memory is not None:
            return True
        for cg in v.scenario.cgroups.values():
            if any(getattr(cg, a) != d for a, d in MEMORY_DEFAULTS.items()):
                return True
    return False


def dd_ops(variants: list[Variant]) -> list[str]:
    """The directions the runs' dd workloads move data in ("read", "write")."""
    ops = {w.op for v in variants for w in v.scenario.workloads.values() if w.enabled and w.kind == "dd"}
    return sorted(ops)


def metrics(run: RunResult, scenario: Scenario) -> dict[str, float]:
    out: dict[str, float] = {}
    # only services (their kind's role): a batch kind's requests (dd's blocks) are the
    # simulator's, not services on the host; dd is measured as its cgroup's disk throughput below
    services = {n: s for n, s in run.services.items() if n not in scenario.workloads or scenario.workloads[n].role == "service"}
    for name, svc in services.items():
        prefix = f"{name} " if len(services) > 1 else ""
        out[f"{prefix}QPS"] = svc.qps
        out[f"{prefix}P50 (s)"] = svc.p50_s
        out[f"{prefix}P90 (s)"] = svc.p90_s
        out[f"{prefix}P99 (s)"] = svc.p99_s
    out["batch CPU (share)"] = batch_share(run, scenario)
    if run.others_cpu_share is not None:  # the host's: its other tenants' CPU meanwhile
        out["others CPU (share)"] = run.others_cpu_share
    if run.replay_cpu_share is not None:  # ... of which replay's own process
        out["replay CPU (share)"] = run.replay_cpu_share
    for c in dict.fromkeys(w.cgroup for w in scenario.workloads.values() if w.enabled):
        if c in run.cgroups:
            out[f"{c} CPU (share)"] = run.cgroups[c].cpu_share
    for c in dict.fromkeys(w.cgroup for w in scenario.workloads.values() if w.enabled):
        cg = run.cgroups.get(c)
        # what each cgroup's threads waited, switched and moved (a host run knows it when probed)
        if cg is not None and math.isfinite(cg.wait_s) and run.measured_s > 0:
            out[f"{c} wait (s/s)"] = cg.wait_s / run.measured_s
            out[f"{c} switches/s"] = cg.nr_switches / run.measured_s
            if cg.nr_migrations >= 0:
                out[f"{c} migrations/s"] = cg.nr_migrations / run.measured_s
        # wake-to-run delays (runqlat; a host run knows them when probed where tracefs can be
        # had): the tail, and the share of wakeups held a millisecond or more — a tick's wait
        hist = cg.runqlat if cg is not None else None
        if hist and sum(hist):
            out[f"{c} wake-to-run P99 (µs)"] = runqlat.percentile(hist, 0.99)
            out[f"{c} wakeups held ≥ 1024 µs (share)"] = sum(hist[runqlat.bucket(1024) :]) / sum(hist)
        # how its run segments end (traced likewise): how long a preempted run lasted (a
        # slice's end, a waker's preemption), how many runs end preempted rather than asleep,
        # and how long a preempted thread waited to run again
        seg = cg.segments if cg is not None else None
        if seg and sum(seg["preempted"]) + sum(seg["blocked"]):
            n_pre = sum(seg["preempted"])
            out[f"{c} runs ended preempted (share)"] = n_pre / (n_pre + sum(seg["blocked"]))
            if n_pre:
                out[f"{c} preempted run P50 (µs)"] = runqlat.percentile(seg["preempted"], 0.5)
            if sum(seg["preempted_wait"]):
                out[f"{c} wait after preemption P50 (µs)"] = runqlat.percentile(seg["preempted_wait"], 0.5)
        out.update(queue_metrics(c, cg.runnable_us if cg is not None else None))
    for c, cg in run.cgroups.items():
        if cg.nr_periods:
            out[f"{c} nr_throttled"] = float(cg.nr_throttled)
    # disk throughput of each cgroup a dd runs in, in the direction(s) it moves data
    m = run.measured_s
    for c, op in dict.fromkeys((w.cgroup, w.op) for w in scenario.workloads.values() if w.enabled and w.kind == "dd"):
        io = run.cgroups[c].io if c in run.cgroups else None
        if io is not None and m > 0:
            out[f"{c} {op} (MB/s)"] = io.get(f"{op}_bytes", 0) / m / 1e6
    out.update(memory_metrics(run, scenario))
    return out


# how full a cgroup's queue on each CPU was: the share of CPU-time with none of its threads
# runnable there, and the mean and spread of its runnable threads on a CPU
QUEUE_EMPTY, QUEUE_MEAN, QUEUE_SD = "queue empty on a CPU (share)", "runnable on a CPU (mean)", "runnable on a CPU (sd)"


def queue_figures(runnable_us: list[list[int]] | None) -> dict[str, float]:
    """The queue's figures (QUEUE_EMPTY, QUEUE_MEAN, QUEUE_SD) from a cgroup's per-CPU times
    at each runnable count (`CgroupResult.runnable_us`; the last bucket, that many or more,
    counted as its floor); empty where it was not counted. An empty queue is when a sibling
    or a sleeper there gets the CPU from a group holding its lag (docs/replay.md, "Where a
    group's queue runs dry")."""
    if not runnable_us:
        return {}
    t = [sum(col) for col in zip(*runnable_us, strict=True)]
    total = sum(t)
    if not total > 0:
        return {}
    mean = sum(k * x for k, x in enumerate(t)) / total
    return {
        QUEUE_EMPTY: t[0] / total,
        QUEUE_MEAN: mean,
        QUEUE_SD: math.sqrt(sum((k - mean) ** 2 * x for k, x in enumerate(t)) / total),
    }


def queue_metrics(c: str, runnable_us: list[list[int]] | None) -> dict[str, float]:
    """`queue_figures` of cgroup `c`, named as replay --compare prints them."""
    return {f"{c} {k}": v for k, v in queue_figures(runnable_us).items()}


def memory_metrics(run: RunResult, scenario: Scenario) -> dict[str, float]:
    """Per cgroup of a memory workload: its memory usage and page cache at the end of the
    run, its peak, and the OOM kills since it was made; per file server, the share of its
    requests that found their file in the page cache over the measured window."""
    out: dict[str, float] = {}
    mib = 1 << 20
    for c in dict.fromkeys(w.cgroup for w in scenario.workloads.values() if w.enabled and w.kind in MEMORY_KINDS):
        cg = run.cgroups.get(c)
        mem = cg.memory if cg is not None else None
        if mem is None:
            continue
        out[f"{c} memory (MiB)"] = mem["current"] / mib
        out[f"{c} peak (MiB)"] = mem["peak"] / mib
        out[f"{c} cache (MiB)"] = mem["file"] / mib
        out[f"{c} OOM kills"] = float(mem["events_oom_kill"])
    for name, svc in run.services.items():
        hits, misses = getattr(svc, "hits", None), getattr(svc, "misses", None)
        if hits is not None and misses is not None and hits + misses:
            out[f"{name} hit ratio"] = hits / (hits + misses)
    return out


def error(measured: float, predicted: float) -> float:
    """predicted / measured - 1 (NaN where either is missing or measured is 0)."""
    if not (math.isfinite(measured) and math.isfinite(predicted)) or measured == 0:
        return math.nan
    return predicted / measured - 1


@dataclass
class VariantComparison:
    name: str
    measured: dict[str, float]
    predicted: dict[str, float] = field(default_factory=dict)

    def table(self) -> str:
        rows = []
        for m, value in self.measured.items():
            p = self.predicted.get(m, math.nan)
            e = error(value, p)
            rows.append([m, sig3(value), sig3(p), f"{e * 100:+.1f}%" if math.isfinite(e) else "-"])
        return f"{self.name}\n" + markdown(["metric", "measured", "predicted", "error"], rows)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def replay(
    path: Path,
    overrides: list[str] | dict[str, Any],
    seed: int | None,
    out: Path | None,
    compare: bool,
    dry_run: bool,
    say: Callable[[str], Any] = _say,
    probe_hz: float | None = None,
) -> int:
    scenario = load_for_host(path, overrides)
    seed = scenario.seed if seed is None else seed
    variants = scenario.variants()
    host = ExperimentResult(scenario.name, seed, scenario.duration_s, scenario.warmup_s, scenario.baseline)
    runs: dict[str, HostRun] = {}
    precheck(variants)
    say(host_kernel().summary())  # after the checks: a refused scenario is one line
    # how late colosim-load's timed sleeps end here, measured while the host is quiet: the
    # prediction's sleeps end as late
    timer = measure_timer() if compare and not dry_run and any_timed(scenario) else None
    if timer is not None:
        say(timer.summary())
    io = uses_io(variants)
    disk: dict[str, Any] | None = None
    with Session(dry_run=dry_run, log=say, io=io, memory=uses_memory(variants)) as session:
        substituted = check_knobs([v.scenario for v in variants], missing_knobs(session), say)
        if io:
            disk = host_disk(session, dd_ops(variants) if compare else [], scenario, say)
        for v in variants:
            say(f"host: {v.name} ({scenario.duration_s:g} s) ...")
            hv = Variant(v.name, v.baseline, host_equivalent(v.scenario, substituted))
            # with --compare the baseline is traced (where tracefs can be had): the server's
            # switches set the calibration's rounds; a plain replay traces nothing it did not ask for
            runs[v.name] = run_on_host(hv, seed, session, substituted, probe_hz=probe_hz, trace=compare and v.baseline)
            host.runs[v.name] = runs[v.name].result
            probed = runs[v.name].probe
            if probed is not None:
                print(f"# {v.name}\n{probed.table()}\n")
    if dry_run:
        if probe_hz:
            print("# --probe: a dry run starts nothing, so nothing is probed")
        for v in variants:
            print(f"# {v.name}")
            for w in runs[v.name].writes:
                print(w)
        return 0
    print("measured on this host\n" + str(host))
    comparisons = [VariantComparison(v.name, metrics(host.runs[v.name], v.scenario)) for v in variants]
    predicted = None
    if disk is not None:
        print(f"\n{disk_note(disk)}")
    fits: dict[str, Fit] = {}
    if compare:
        predicting = load_for_host(path, overrides, disk) if disk else scenario
        fits = calibrate_services(predicting, host, seed, substituted, timer)
        predicted, factors = predict(predicting, host, seed, substituted, fits, timer=timer)
        for c in comparisons:
            c.predicted = metrics(predicted.runs[c.name], next(v.scenario for v in variants if v.name == c.name))
        print()
        for fit in fits.values():
            print(fit.describe())
        print()
        print("\n\n".join(c.table() for c in comparisons))
    if out is not None:
        write_outputs(out, scenario, host, predicted, comparisons, runs, fits, disk, timer)
        print(f"\nwrote {out / 'comparison.json'} and {out / 'report.html'}")
    return 0


def precheck(variants: list[Variant]) -> None:
    """Every program every run needs is on this host, before anything is created; and
    nothing the host cannot replay (network limits) is asked for. (Memory knobs the kernel
    lacks are refused once the session knows the layout: host_run.check_knobs.)"""
    from replay.workloads import HostWorkload

    for v in variants:
        for path, cg in v.scenario.cgroups.items():
            for attr in ("net_cls_classid", "net_egress_bps"):
                if getattr(cg, attr) != type(cg).model_fields[attr].default:
                    alias = type(cg).model_fields[attr].alias
                    raise HostError(network_refusal(f'cgroups."{path}"."{alias}"'))

    for v in variants:
        for name, w in v.scenario.workloads.items():
            if w.enabled and w.cgroup == ROOT_CGROUP:
                raise HostError(
                    f'workloads.{name}.cgroup = "/": replay runs workloads only beneath its own cgroup, '
                    "never in the host's root cgroup (the simulator models the root and its autogroups)"
                )
            if w.enabled:
                HostWorkload(name, w, {}, f"workloads.{name}").check()


def scratch_disk(session: Session) -> BlockDevice:
    """The disk replay's IO runs on (known once the session was opened with io=True)."""
    if session.backend.device is None:
        raise HostError("the scratch disk is not known: the replay session was opened without IO")
    return session.backend.device


def host_disk(session: Session, ops: list[str], scenario: Scenario, say: Callable[[str], Any]) -> dict[str, Any]:
    """[node.disk] for this host: the scratch disk's scheduler, and for each direction in
    `ops` the rate (wbps / rbps) fitted to a solo direct dd measured now. Also records, under
    "_measured", what was measured (B/s), for the report."""
    dev = scratch_disk(session)
    disk: dict[str, Any] = {"scheduler": dev.scheduler}
    measured: dict[str, float] = {}
    if session.dry_run:
        return disk
    base = scenario.node.disk.model_dump() if scenario.node.disk is not None else {}
    if "latency" in base:  # a bare number is seconds in a scenario document
        base["latency"] = f"{base['latency']}ns"
    base["scheduler"] = dev.scheduler
    for op in ops:
        say(f"disk: {DISK_CALIBRATION_S:g} s of solo direct dd ({op}, 1 MiB blocks) on {dev.name} ({dev.devno}) ...")
        rate = solo_dd_rate(session, op)
        measured[op] = rate
        key = "wbps" if op == "write" else "rbps"
        disk[key] = fit_disk_rate(base, op, rate)
        base[key] = disk[key]
    disk["_measured"] = measured
    disk["_device"] = f"{dev.name} ({dev.devno})"
    disk["_counters"] = session.io_counters
    return disk


def disk_note(disk: dict[str, Any]) -> str:
    lines = [f"disk model of this host ({disk.get('_device', '?')}): scheduler {disk['scheduler']} (from its queue/scheduler)"]
    for op, rate in disk.get("_measured", {}).items():
        key = "wbps" if op == "write" else "rbps"
        lines.append(
            f"  calibrated {key} = {disk[key] / 1e6:.0f} MB/s: a solo direct dd {op} (1 MiB blocks, one IO in flight) "
            f"measured {rate / 1e6:.0f} MB/s on the host over {DISK_CALIBRATION_S:g} s, and the simulator's solo dd matches it"
        )
    if disk.get("_counters"):
        lines.append(f"  IO per cgroup measured from {disk['_counters']}")
    if not disk.get("_measured"):
        lines.append("  rates not calibrated (no dd workload, or no --compare): the scenario's [node.disk] rates stand")
    return "\n".join(lines)


def _disk_table(disk: dict[str, Any]) -> dict[str, Any]:
    """The [node.disk] override without the report's notes."""
    return {k: v for k, v in disk.items() if not k.startswith("_")}


def solo_dd_rate(session: Session, op: str) -> float:
    """Bytes/s one direct dd (1 MiB blocks) moves alone, measured by its cgroup's blkio
    counters after a short settling time; in a cgroup of the run folder, removed after."""
    backend = session.backend
    cg = "_disk_calibration"
    scratch = session.scratch()
    f = scratch / "calibration"
    count = (512 << 20) // DISK_CALIBRATION_BLOCK
    backend.create([cg])
    try:
        if op == "read":
            done = subprocess.run(
                ["dd", "if=/dev/zero", f"of={f}", "oflag=direct", f"bs={DISK_CALIBRATION_BLOCK}", f"count={count}", "status=none"],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise HostError(f"disk calibration: dd could not write {f}: {done.stderr.strip()[-300:]}")
            dd = ["dd", f"if={f}", "of=/dev/null", "iflag=direct"]
        else:
            dd = ["dd", "if=/dev/zero", f"of={f}", "oflag=direct", "conv=notrunc"]
        dd += [f"bs={DISK_CALIBRATION_BLOCK}", f"count={count}", "status=none"]
        proc = session.spawn(["sh", "-c", 'while :; do "$@" || exit $?; done', "dd-loop", *dd], cg, stderr=subprocess.PIPE)
        time.sleep(DISK_CALIBRATION_SETTLE_S)
        a, ta = backend.io_stats(cg), time.monotonic()
        time.sleep(DISK_CALIBRATION_S)
        b, tb = backend.io_stats(cg), time.monotonic()
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr is not None else b""
            raise HostError(f"disk calibration: dd failed (status {proc.returncode}): {stderr.decode(errors='replace').strip()[-300:]}")
        rate = (b[f"{op}_bytes"] - a[f"{op}_bytes"]) / (tb - ta)
        if rate <= 0:
            raise HostError(f"disk calibration: the solo dd moved nothing the blkio counters saw on {scratch_disk(session).devno}")
        return rate
    finally:
        session.kill_all()
        try:
            f.unlink()
        except OSError:
            pass
        backend.remove()
        backend.create([])


def fit_disk_rate(base: dict[str, Any], op: str, target: float, rounds: int = 3) -> int:
    """The disk rate (wbps / rbps) at which the simulator's solo direct dd (1 MiB blocks,
    one IO in flight) moves `target` bytes/s: each IO takes dd's CPU + the linear model's
    device time + the access latency, so the rate is solved from the per-IO time, and the
    fixed overheads re-measured in the simulator each round."""
    from sim.runner import run_variant

    key = "wbps" if op == "write" else "rbps"
    seq = base.get("wseqiops" if op == "write" else "rseqiops", 120_000)
    pages = DISK_CALIBRATION_BLOCK / 4096
    rate = float(target)
    for _ in range(rounds):
        disk = {**base, key: max(1, round(rate))}
        doc = {
            "scenario": {"name": "disk calibration", "duration": "3s", "warmup": "0.5s", "sample_interval": "0s"},
            "node": {"cores_per_socket": 1, "disk": disk},
            "cgroups": {"c": {}},
            "workloads": {"d": {"kind": "dd", "cgroup": "c", "op": op, "direct": True, "block": DISK_CALIBRATION_BLOCK}},
        }
        sc = Scenario.from_document(doc)
        io = run_variant(Variant("disk calibration", True, sc), 1).cgroups["c"].io
        assert io is not None, "the calibration node has a disk"
        got = io[f"{op}_bytes"] / 2.5
        if got <= 0:
            break

        # per-IO time = overhead + device cost; device cost of one block at `rate`:
        # max(1/seqiops, page) + (pages - 1) x page, page = 4096 / rate
        def cost(r: float) -> float:
            page = 4096 / r
            return max(1 / seq, page) + (pages - 1) * page

        overhead = DISK_CALIBRATION_BLOCK / got - cost(rate)
        want = DISK_CALIBRATION_BLOCK / target - overhead
        if want <= 1 / seq:
            break  # faster than the model's overheads allow: keep the closest rate
        # solve cost(r) = want for r (page > 1/seqiops at any realistic rate: cost = pages x page)
        page = want / pages if want / pages > 1 / seq else (want - 1 / seq) / (pages - 1)
        rate = 4096 / page
    return max(1, round(rate))


def alone_runs(scenario: Scenario, measured_base: RunResult) -> dict[str, AloneRun]:
    """What the host measured of each service in the baseline (alone) run, as the calibration
    takes it (replay/calibration.py AloneRun): the services the scenario fits — enabled closed
    and open loops the run measured."""
    from replay.workloads import MeasuredService, ReportedService

    out: dict[str, AloneRun] = {}
    for name, w in scenario.workloads.items():
        if not isinstance(w, ClosedLoop | OpenLoop) or not w.enabled or name not in measured_base.services:
            continue
        got = measured_base.services[name]
        percentiles = (
            dict(got.reported or {}) if isinstance(got, ReportedService) else {p: got.percentile(p) for p in (50.0, 75.0, 90.0, 99.0)}
        )
        cg = measured_base.cgroups.get(w.cgroup)
        out[name] = AloneRun(
            qps=got.qps,
            percentiles=percentiles,
            busy=cg.cpu_share if cg is not None and math.isfinite(cg.cpu_share) else None,
            generator_cpu=got.generator_cpu if isinstance(got, MeasuredService) else None,
            generator_switches=got.generator_switches if isinstance(got, MeasuredService) else None,
            server_switches=got.server_switches if isinstance(got, MeasuredService) else None,
            others=measured_base.others_cpu_share,
            others_burst=measured_base.others_burst_s,
            queue=(queue_figures(cg.runnable_us) or None) if cg is not None else None,
            reported=isinstance(got, ReportedService),
        )
    return out


def calibrate_services(
    scenario: Scenario, host: ExperimentResult, seed: int, substituted: set[Knob], timer: TimerOvershoot | None = None
) -> dict[str, Fit]:
    """Fit each service measured in the baseline (alone) run: its distribution, its load
    generator's CPU and its gaps (replay/calibration.py)."""
    base = next(v for v in scenario.variants() if v.baseline)
    measured_base = host.runs[base.name]
    return fit_alone_runs(scenario, alone_runs(scenario, measured_base), measured_base.ncpus, seed, substituted, timer)


# a first fit whose alone requests crossed CPUs this close to once a round each way is kept
CROSSED_SETTLED = 0.05


def others_burst(alone: dict[str, AloneRun]) -> float | None:
    """The other tenants' bursts (s) as the traced alone run saw them; None: not traced."""
    return next((a.others_burst for a in alone.values() if a.others_burst is not None), None)


def fit_alone_runs(
    scenario: Scenario, alone: dict[str, AloneRun], ncpus: int, seed: int, substituted: set[Knob], timer: TimerOvershoot | None = None
) -> dict[str, Fit]:
    """Fit each service to what its alone run measured (`alone_runs`), on `ncpus` CPUs;
    colosim-load's timed sleeps end `timer` late, as on the host (replay/timer_slack.py)."""
    base = next(v for v in scenario.variants() if v.baseline)
    others = next((a.others for a in alone.values()), None)
    # the alone run's other tenants run beside the simulated alone runs the fit makes, in the
    # bursts the trace saw them run (replay/background.py)
    alone_background = background_cpus(others, ncpus)
    sc = with_background(timer_equivalent(host_equivalent(base.scenario, substituted), timer), alone_background, others_burst(alone))
    fits: dict[str, Fit] = {}
    for name, run in alone.items():
        w = scenario.workloads[name]
        assert isinstance(w, ClosedLoop | OpenLoop)
        # a think time is fitted to the gaps only for a real server whose scenario has none:
        # colosim-load runs the scenario's own think times
        gaps = isinstance(w, ClosedLoop) and run.reported and mean_s(w.think) == 0
        # the generator's threads as replay runs it, where the scenario gives none: in the fit's
        # simulated alone runs too
        # (on the CPUs the host run had: fidelity --repredict may run elsewhere)
        gen = generator_threads(w.host.program, w.clients, ncpus) if isinstance(w, ClosedLoop) and w.client_threads is None else None
        # ... and an event loop's timing, where it is one (and the scenario says nothing)
        event = (
            generator_event_loop(w.host.program) if isinstance(w, ClosedLoop) and w.event_loop is None and mean_s(w.think) == 0 else None
        )
        if gen is not None or event is not None:
            sc = sc.model_copy(deep=True)
            sw = sc.workloads[name]
            assert isinstance(sw, ClosedLoop)
            if gen is not None:
                sw.client_threads = gen
            if event is not None:
                sw.event_loop = EventLoop(rearm=event)
        alone_sc = shortened(sc, run.qps)
        simulate = simulator_of(alone_sc, name, seed, frozenset(substituted), ncpus)
        clients = w.clients if isinstance(w, ClosedLoop) else None
        # the threads a request runs on, over which its measured CPU is split (the model's
        # service time is per fanout thread)
        threads = (ncpus if w.fanout == "ncpus" else int(w.fanout)) if isinstance(w, ClosedLoop) else 1
        x = w.cross_cpu if isinstance(w, ClosedLoop) else None
        cross = (x.server / 1e9, x.client / 1e9) if x is not None else (0.0, 0.0)
        fit_to = functools.partial(
            fit_service, name, run, simulate, ncpus, clients, gaps=gaps, threads=threads, background_cpus=alone_background
        )
        fit = fit_to(cross=cross)
        if any(cross) and math.isfinite(fit.crossings) and abs(fit.crossings / fit.rounds - 1) > CROSSED_SETTLED:
            # not every message of the model's alone run crossed CPUs (or its requests had fewer
            # rounds, or none after a think): only those that did paid the costs
            fit = fit_to(cross=cross, crossings=fit.crossings)
        sw = sc.workloads[name]
        fits[name] = replace(fit, client_threads=gen, event_loop=event, report=sw.report if isinstance(sw, ClosedLoop) else None)
        sc = apply_fit(sc, fits[name])
    return fits


def predict(
    scenario: Scenario,
    host: ExperimentResult | None,
    seed: int,
    substituted: set[Knob],
    fits: dict[str, Fit] | None = None,
    background: dict[str, float] | None = None,
    timer: TimerOvershoot | None = None,
    background_burst_s: float | None = None,
) -> tuple[ExperimentResult, dict[str, float]]:
    """Calibrate each service on the measured baseline (or take `fits` made by
    calibrate_services), then simulate every variant beside its host run's other tenants
    (`background`: variant -> CPUs, replay.background; by default each measured variant's
    own; `background_burst_s`: their bursts, by default as the traced baseline saw them;
    `timer`: how late colosim-load's timed sleeps end on the host, replay/timer_slack.py).
    Returns the prediction and, per service, its fitted figures: NAME (the service's mean
    over the scenario's), "NAME sigma" (a lognormal's), "NAME client_cpu_s", "NAME
    rounds", "NAME rounds from server" (1.0: the server's traced switches, else the
    generator's), "NAME delay_s", "NAME service_cpu_s" (NaN: fitted), "NAME poor fit" (1.0
    when poor); and "VARIANT background CPUs" per variant (and, where it is not 0, "VARIANT
    background CPUs run": what the model gave it, `root_own_cpus`). `host` may be None when both
    `fits` and `background` are given (fidelity --repredict has no host run to hand)."""
    from sim.runner import run_variant

    if fits is None:
        assert host is not None, "predict: without a host run, give the fits"
        fits = calibrate_services(scenario, host, seed, substituted, timer)
    if background is None:
        assert host is not None, "predict: without a host run, give the background"
        background = {n: background_cpus(r.others_cpu_share, r.ncpus) for n, r in host.runs.items()}
    if background_burst_s is None and host is not None and host.baseline in host.runs:
        background_burst_s = host.runs[host.baseline].others_burst_s
    calibrated = {v.name: timer_equivalent(host_equivalent(v.scenario, substituted), timer) for v in scenario.variants()}
    factors: dict[str, float] = {}
    for name, fit in fits.items():
        calibrated = {n: apply_fit(sc, fit) for n, sc in calibrated.items()}
        fitted = next(iter(calibrated.values())).workloads[name]
        assert isinstance(fitted, ClosedLoop | OpenLoop)
        factors[name] = mean_s(fitted.service) / mean_s(scenario.workloads[name].service)  # type: ignore[union-attr]
        if isinstance(fitted.service, Lognormal):
            factors[f"{name} sigma"] = fitted.service.sigma
        factors[f"{name} client_cpu_s"] = fit.client_cpu_s
        factors[f"{name} rounds"] = float(fit.rounds)
        factors[f"{name} rounds from server"] = float(fit.rounds_from == "server")
        factors[f"{name} delay_s"] = fit.delay_s
        factors[f"{name} service_cpu_s"] = fit.cpu_s if fit.cpu_s is not None else math.nan
        factors[f"{name} poor fit"] = float(fit.quality == "poor")
    for n in calibrated:
        factors[f"{n} background CPUs"] = background.get(n, 0.0)
        calibrated[n] = with_background(calibrated[n], background.get(n, 0.0), background_burst_s)
    result = ExperimentResult(scenario.name, seed, scenario.duration_s, scenario.warmup_s, scenario.baseline)
    for v in scenario.variants():
        run = run_variant(Variant(v.name, v.baseline, calibrated[v.name]), seed, substitute=frozenset(substituted))
        result.runs[v.name] = run
        if background.get(v.name, 0.0) > 0:
            # what the model gave the background it was handed: the host's tenants got theirs
            # (that is how it is measured), the model may starve them (docs/replay.md, "The
            # other tenants' bursts")
            factors[f"{v.name} background CPUs run"] = root_own_cpus(run)
    return result, factors


def root_own_cpus(run: RunResult) -> float:
    """The CPUs the root cgroup's own tasks used over a simulated run's measured window (the
    background's, in a prediction: the scenario's own workloads are in its cgroups)."""
    if "" not in run.cgroup_names or not run.measured_s > 0 or run.cpu_busy_s.size == 0:
        return math.nan
    return float(run.cpu_busy_s[:, run.cgroup_names.index("")].sum() / run.measured_s)


def _runqlat_doc(host: RunResult, predicted: RunResult | None) -> dict[str, Any]:
    """The wake-to-run histograms (sim/runqlat.py's buckets) of the cgroups the host traced,
    beside the prediction's: {"runqlat": {"host": {cgroup: counts}, "predicted": {...}}}, and
    their run segments likewise ("run_segments": {cgroup: {"preempted", "blocked",
    "preempted_wait"}})."""
    traced = {c: cg.runqlat for c, cg in host.cgroups.items() if cg.runqlat is not None}
    if not traced:
        return {}
    sim = {c: predicted.cgroups[c].runqlat for c in traced if predicted is not None and c in predicted.cgroups}
    doc: dict[str, Any] = {"runqlat": {"host": traced, "predicted": sim}}
    seg = {c: cg.segments for c, cg in host.cgroups.items() if cg.segments is not None}
    if seg:
        sim_seg = {c: predicted.cgroups[c].segments for c in seg if predicted is not None and c in predicted.cgroups}
        doc["run_segments"] = {"host": seg, "predicted": sim_seg}
    return doc


def write_outputs(
    out, scenario, host, predicted, comparisons, runs, fits: dict[str, Fit], disk=None, timer: TimerOvershoot | None = None
) -> None:
    from sim.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "scenario": scenario.name,
        # per service: its fitted model, the residual of each fitted metric, and the quality
        # ("poor" when any is off by more than replay.calibration.POOR_FIT); overall "poor"
        # when any service's is
        "calibration": calibration_doc(fits),
        # what this host's kernel said of its scheduler, and where each value came from
        "host_kernel": host_kernel().as_dict(),
        # how late a timed sleep ended here, which the prediction added to colosim-load's
        # waits (None: nothing of the scenario sleeps on colosim-load's timers)
        "timer_overshoot": None if timer is None else timer.to_dict(),
        "disk": None
        if disk is None
        else {
            **_disk_table(disk),
            "measured_solo_Bps": disk.get("_measured", {}),
            "device": disk.get("_device"),
            "io_counters": disk.get("_counters"),
        },
        "variants": {
            c.name: {
                "measured": c.measured,
                "predicted": c.predicted,
                "error": {m: error(c.measured[m], c.predicted.get(m, math.nan)) for m in c.measured} if predicted else {},
                "knob_writes": [{"t_s": w.t, "file": w.path, "value": w.value, "was": w.old.strip()} for w in runs[c.name].writes],
                "decisions": host.runs[c.name].decisions,
                **({"probe": runs[c.name].probe.to_dict()} if runs[c.name].probe is not None else {}),
                **_runqlat_doc(host.runs[c.name], predicted.runs.get(c.name) if predicted else None),
            }
            for c in comparisons
        },
    }
    (out / "comparison.json").write_text(json.dumps(finite(doc), indent=2) + "\n")
    both = ExperimentResult(scenario.name, host.seed, host.duration_s, host.warmup_s, f"{scenario.baseline} · host")
    for name, run in host.runs.items():
        both.runs[f"{name} · host"] = run
        if predicted is not None:
            both.runs[f"{name} · sim"] = predicted.runs[name]
    from replay.probe import cpu_figure

    probed = cpu_figure({f"{name} · host": r.probe for name, r in runs.items() if r.probe is not None})
    write_report(both, out / "report.html", extra=[probed] if probed is not None else [])


def _stale_trace_instances(say: Callable[[str], Any]) -> list[str]:
    """Trace instances (replay.runqlat) whose process died: removed and said; none looked
    for where tracefs cannot be reached (then no run of ours could have made one)."""
    from replay.runqlat import remove_stale_instances

    try:
        removed = remove_stale_instances(say)
    except HostError:
        return []
    for name in removed:
        say(f"removed trace instance {name} (its process is gone)")
    return removed


def _kill_and_wait(pids: set[int], kill, timeout: float = 5.0) -> None:
    """SIGKILL `pids` (by `kill`) and wait until none of them runs any more (gone, or a zombie
    whose CPU is spent), at most `timeout` seconds."""
    for pid in pids:
        kill(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = []
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue  # gone
            if stat.rpartition(")")[2].split()[0] != "Z":
                running.append(pid)
        if not running:
            return
        time.sleep(0.02)


def cleanup(say: Callable[[str], Any] = _say) -> int:
    """`colosim replay --cleanup`: remove what killed replays left — their run folders in the
    cgroup hierarchies (and the processes in them), their directories in the file system (and
    the processes holding them) — and say what; a replay still running is left alone."""
    import os
    import signal

    from replay.cgroupfs import detect_layout, held_elsewhere, leftover_folders, remove_tree, visible_tasks
    from replay.session import LOCK_PATH, leftover_runs, remove_leftover, running_folder
    from sim import liveness

    if os.geteuid() != 0:
        raise HostError("replay --cleanup needs root")

    def kill(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    # a replay still under way keeps its cgroups and directory: the one holding the lock (of
    # any version), and any whose recorded owner lives
    busy = running_folder()
    if busy:
        say(f"{busy}: the replay holding {LOCK_PATH} runs it: left alone")
    runs, live = [], {busy}
    for run in leftover_runs():
        if run.folder == busy:
            continue
        if run.alive:
            live.add(run.folder)
            say(f"run {run.run_id} is still under way ({liveness.describe(run.owner)}): left alone")
        else:
            runs.append(run)
    # the cgroups first (their processes die with them), then the file system
    layout = detect_layout(io=None, memory=None)
    folders = [f for f in leftover_folders(layout) if f.name not in live]
    # Whose is each folder, decided before anything is killed: one with tasks visible here is
    # ours. Killing them in one hierarchy empties the run's folder in the others while the
    # tasks still exit, and their exit's CPU must not read as another namespace's tasks
    ours = {f: tasks for f in folders if (tasks := visible_tasks(f))}
    _kill_and_wait({pid for tasks in ours.values() for pid in tasks}, kill)
    for f in folders:
        if f not in ours and (why := held_elsewhere(f, layout)) is not None:
            say(f"{f}: {why}: left alone")
            continue
        try:
            n = remove_tree(f, kill=kill)
        except OSError as err:  # EBUSY: tasks this namespace cannot see, asleep
            say(f"{f}: not removed ({os.strerror(err.errno) if err.errno else err}; tasks not visible here hold it?)")
            continue
        say(f"removed {f} ({n} cgroup{'s' if n != 1 else ''})")
    for run in runs:
        there, files, size, killed = remove_leftover(run)
        if there:
            pids = f"; killed {len(killed)} process{'es' if len(killed) != 1 else ''} using it" if killed else ""
            say(f"removed {run.dir} (run {run.run_id}: {files} file{'s' if files != 1 else ''}, {size / 2**20:.1f} MiB{pids})")
        else:
            say(f"removed the record of run {run.run_id} ({run.record}; it left no directory)")
    instances = _stale_trace_instances(say)
    if not folders and not runs and not instances:
        say("nothing to clean up")
    return 0
