"""Why does `stress --cpu 10` get ~10% of this 2-CPU host beside ClickHouse in one arrangement
and ~50% in another (docs/replay.md, "Probe")? A one-off harness: ClickHouse 18.16 +
clickhouse-benchmark -c 10 beside `stress --cpu 10`, no isolation, in several arrangements,
probed (replay/probe.py), repeated, interleaved so that the shared machine's load falls on all.

    cgroups       server + client in cgroup online, stress in cgroup offline (what replay does)
    client-apart  server in online, client in its own cgroup, stress in offline
    autogroup     server left in our (root) cpu cgroup in a session of its own (setsid: with
                  kernel.sched_autogroup_enabled=1 the kernel schedules it in a new autogroup,
                  a task group of weight 1024 beside the root's), client in online, stress in
                  offline
    pingpong-same   10 request/response pairs (experiments/pingpong.py, 2 ms of CPU per
                    message) both sides in online, stress in offline — no ClickHouse
    pingpong-apart  the same pairs, side a in online, side b in client
    pingpong-same-onecpu   as pingpong-same, both sides of pair i pinned to CPU i mod 2
    pingpong-same-twocpus  as pingpong-same, side a pinned to CPU 0, side b to CPU 1 (stress
                    stays unpinned in every arrangement)
    duty            20 processes in online that burn 2 ms and sleep 2 ms (a timer) each: as
                    many sleeps and wakeups, nobody waking anybody
    <any of the pingpong or duty arrangements>@US   the same with US µs of CPU per message (or
                    per duty burst and sleep) instead of 2,000: `pingpong-same@1500`

Everything is created beneath this process's own cgroup (replay.session.Session) and removed
on every exit path; the autogroup is the kernel's, gone with the session's last process.
Run as root, from the repository, inside a private mount namespace where debugfs is mounted
(so that the probe can read sched/debug; the host's mount table is not touched):

    unshare -m sh -c 'mount -t debugfs none /sys/kernel/debug && \\
        PYTHONPATH=. python experiments/probe_arrangements.py --reps 5 --out out/arrangements'
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path

from policies.cgroup import Knob, KnobWrite, NodeStats
from replay.cgroupfs import HostBackend, read_proc_stat
from replay.host_run import start_runqlat
from replay.probe import PROC, Probe, ProbeResult, Watch, parse_cpu_cgroup, parse_stat
from replay.runqlat import RunqLat, RunqLatFigures, format_figures
from replay.session import Session
from replay.workloads import CLICKHOUSE_CONFIG, CLICKHOUSE_USERS, _free_port, _wait_port, parse_clickhouse_json
from sim.results import finite, markdown, sig3
from sim.scenario.workloads import SEED_QUERY

ARRANGEMENTS = (
    "cgroups",
    "client-apart",
    "autogroup",
    "pingpong-same",
    "pingpong-apart",
    "duty",
    "pingpong-same-onecpu",
    "pingpong-same-twocpus",
)
TRACE = False  # --trace: run segments and wake-to-run delays per group from sched tracepoints
PAIRS, WORK_US = 10, 2000  # the ping-pong stand-in: 10 pairs, 2 ms of CPU per message


def _descendants_tids(pid: int) -> list[int]:
    """Every thread of a process (the server: it forks nothing)."""
    try:
        return [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
    except OSError:
        return []


def make_groups(session: Session, shares: dict[str, int]) -> list[str]:
    """online, offline, client beneath the run folder, with `shares` written (default 1024)."""
    groups = ["online", "offline", "client"]
    session.backend.create(groups)
    for g, v in shares.items():
        session.backend.write(KnobWrite(g, Knob.CPU_SHARES, v))
    return groups


def run_pingpong(session: Session, label: str, warmup: float, seconds: float, hz: float, shares: dict[str, int]) -> dict:
    """10 ping-pong pairs beside stress: both sides in one cgroup, or one side each in two."""
    arrangement, _, work = label.partition("@")
    work_us = int(work) if work else WORK_US
    tracer: RunqLat | None = None
    traced: ExitStack | None = None
    backend: HostBackend = session.backend
    groups = make_groups(session, shares)
    tmp = Path(tempfile.mkdtemp(prefix="pp-", dir=session.run_dir()))
    try:
        script = str(Path(__file__).with_name("pingpong.py"))
        for _ in range(2 * PAIRS if arrangement == "duty" else 0):
            session.spawn([sys.executable, script, "duty", str(work_us), str(work_us)], "online")
        for i in range(PAIRS if arrangement != "duty" else 0):
            ab, ba = tmp / f"ab{i}", tmp / f"ba{i}"
            os.mkfifo(ab)
            os.mkfifo(ba)
            pin_a, pin_b = {"pingpong-same-onecpu": ([str(i % 2)], [str(i % 2)]), "pingpong-same-twocpus": (["0"], ["1"])}.get(
                arrangement, ([], [])
            )
            session.spawn([sys.executable, script, "a", str(ba), str(ab), str(work_us), *pin_a], "online")
            session.spawn(
                [sys.executable, script, "b", str(ab), str(ba), str(work_us), *pin_b],
                "client" if arrangement == "pingpong-apart" else "online",
            )
        watch = {
            g: Watch(
                tids=partial(backend.tids, g),
                percpu=partial(backend.percpu_usage, g),
                paths=(backend.cfs_rq_path(g), backend.cfs_rq_path(""), "/"),
            )
            for g in groups
        }
        probe = Probe(watch, len(backend.cpus()), hz=hz)
        session.spawn(["stress", "--cpu", "10", "--timeout", f"{int(warmup + seconds + 5)}s"], "offline")
        probe.start()
        tracer, traced = start_trace(session, groups)
        time.sleep(warmup)
        node0 = read_proc_stat()
        loadavg0 = Path("/proc/loadavg").read_text().split()[0]
        probe.mark()
        if tracer is not None:
            tracer.mark()
        time.sleep(seconds)
        node1 = read_proc_stat()
        probed = probe.stop()
        segments = end_trace(tracer, traced)
    finally:
        if traced is not None:
            traced.close()  # a no-op after end_trace
        session.kill_all()
        backend.remove()
        backend.create([])
    nan = float("nan")
    return {
        "arrangement": label,
        "qps": nan,
        "p50_s": nan,
        "p99_s": nan,
        "server": {"pid": 0, "autogroup": "-", "cpu_cgroup": "-", "session": 0},
        "node_busy_cpus": node_busy(node0, node1),
        "loadavg_at_start": float(loadavg0),
        "probe": probed.to_dict(),
        "_probe": probed,
        "_trace": segments,
    }


def start_trace(session: Session, groups: list[str]) -> tuple[RunqLat | None, ExitStack | None]:
    return start_runqlat(session.backend, groups, print) if TRACE else (None, None)


def end_trace(tracer: RunqLat | None, stack: ExitStack | None) -> dict[str, RunqLatFigures]:
    """Stop tracing (the buffer drained) and the groups' figures; {} when not tracing."""
    if tracer is None or stack is None:
        return {}
    stack.close()
    return tracer.result()


def run_one(session: Session, arrangement: str, warmup: float, seconds: float, hz: float, shares: dict[str, int]) -> dict:
    if arrangement.startswith(("pingpong", "duty")):
        return run_pingpong(session, arrangement, warmup, seconds, hz, shares)
    tracer: RunqLat | None = None
    traced: ExitStack | None = None
    backend: HostBackend = session.backend
    groups = make_groups(session, shares)
    tmp = Path(tempfile.mkdtemp(prefix="ch-", dir=session.run_dir()))
    port = _free_port()
    (tmp / "config.xml").write_text(CLICKHOUSE_CONFIG.format(port=port, dir=tmp))
    (tmp / "users.xml").write_text(CLICKHOUSE_USERS)
    log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed below
    argv = ["clickhouse-server", f"--config-file={tmp / 'config.xml'}"]
    if arrangement == "autogroup":
        # our own cpu cgroup (the root here), a session of its own: killed with the session's
        # process groups like every process replay starts
        server = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=tmp, start_new_session=True)
        session.procs.append(server)
    else:
        server = session.spawn(argv, "online", stdout=log, stderr=log, cwd=tmp)
    try:
        _wait_port(port, server, "clickhouse-server")
        watch = {
            g: Watch(tids=partial(backend.tids, g), percpu=partial(backend.percpu_usage, g), paths=(backend.cfs_rq_path(g),))
            for g in groups
        }
        if arrangement == "autogroup":
            watch["server"] = Watch(tids=partial(_descendants_tids, server.pid))
        for w in watch.values():
            w.paths = (*w.paths, backend.cfs_rq_path(""), "/")
        probe = Probe(watch, len(backend.cpus()), hz=hz)
        stress = session.spawn(["stress", "--cpu", "10", "--timeout", f"{int(warmup + seconds + 5)}s"], "offline")
        probe.start()
        tracer, traced = start_trace(session, groups)
        time.sleep(warmup)
        node0 = read_proc_stat()
        probe.mark()
        if tracer is not None:
            tracer.mark()
        loadavg0 = Path("/proc/loadavg").read_text().split()[0]
        (tmp / "q.txt").write_text(SEED_QUERY + "\n")
        with open(tmp / "q.txt") as q, open(tmp / "bench.out", "w") as out:
            client_cg = "client" if arrangement == "client-apart" else "online"
            bench = session.spawn(
                [
                    "clickhouse-benchmark",
                    "--port",
                    str(port),
                    "-c",
                    "10",
                    "-i",
                    "100000000",
                    "-t",
                    str(round(seconds)),
                    "-d",
                    "0",
                    "--json",
                    str(tmp / "bench.json"),
                ],
                client_cg,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=q,
            )
            bench.wait(timeout=seconds + 60)
        node1 = read_proc_stat()
        probed = probe.stop()
        segments = end_trace(tracer, traced)
        svc = parse_clickhouse_json("clickhouse", (tmp / "bench.json").read_text(), seconds)
        stress.poll()
        autogroup = (PROC / str(server.pid) / "autogroup").read_text().split()[0]
        server_cg = parse_cpu_cgroup((PROC / str(server.pid) / "cgroup").read_text())
        server_sid = parse_stat((PROC / str(server.pid) / "stat").read_text()).session
    finally:
        if traced is not None:
            traced.close()  # a no-op after end_trace
        session.kill_all()
        log.close()
        backend.remove()
        backend.create([])
    busy = node_busy(node0, node1)
    return {
        "arrangement": arrangement,
        "qps": svc.qps,
        "p50_s": svc.p50_s,
        "p99_s": svc.p99_s,
        "server": {"pid": server.pid, "autogroup": autogroup, "cpu_cgroup": server_cg, "session": server_sid},
        "node_busy_cpus": busy,
        "loadavg_at_start": float(loadavg0),
        "probe": probed.to_dict(),
        "_probe": probed,
        "_trace": segments,
    }


def node_busy(a: NodeStats, b: NodeStats) -> float:
    """CPUs the whole node was busy (everyone's work, ours and the other tenants')."""
    total = b.total_ns - a.total_ns
    return (b.busy_ns - a.busy_ns) / total * a.ncpus if total else float("nan")


def shares(r: dict) -> dict[str, float]:
    p: ProbeResult = r["_probe"]
    w = p.window_s
    g = p.groups
    online = g["online"].run_s + (g["server"].run_s if "server" in g else 0) + g["client"].run_s
    return {"online": online / w / p.ncpus, "offline": g["offline"].run_s / w / p.ncpus}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--hz", type=float, default=20.0)
    ap.add_argument("--arrangements", default=",".join(ARRANGEMENTS))
    ap.add_argument(
        "--shares", action="append", default=[], metavar="GROUP=N", help="cpu.shares of online, offline or client (default 1024)"
    )
    ap.add_argument("--trace", action="store_true", help="trace run segments and wake-to-run delays (replay/runqlat.py)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    global TRACE
    TRACE = args.trace
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.arrangements.split(",")
    group_shares = {g: int(v) for g, v in (x.split("=", 1) for x in args.shares)}
    results: list[dict] = []
    with Session() as session:
        for rep in range(args.reps):
            for a in names:
                r = run_one(session, a, args.warmup, args.seconds, args.hz, group_shares)
                r["rep"] = rep
                s = shares(r)
                print(
                    f"rep {rep} {a:13s} QPS {r['qps']:.2f} P50 {r['p50_s']:.2f} s  online {s['online']:.3f} offline {s['offline']:.3f} of the node;"
                    f" node busy {r['node_busy_cpus']:.2f} CPUs, load {r['loadavg_at_start']}; server {r['server']['autogroup']} {r['server']['cpu_cgroup']};"
                    f" probe cost {r['_probe'].cost * 100:.1f}% CPU",
                    flush=True,
                )
                traced = "".join("\n" + format_figures(g, f) + "\n" for g, f in r["_trace"].items())
                print(traced, flush=True)
                (args.out / f"{a}-{rep}.txt").write_text(r["_probe"].table(top=20) + "\n" + traced)
                results.append(r)
    rows = []
    for a in names:
        rs = [r for r in results if r["arrangement"] == a]
        cols = {
            "QPS": [r["qps"] for r in rs],
            "P50 (s)": [r["p50_s"] for r in rs],
            "online share": [shares(r)["online"] for r in rs],
            "offline share": [shares(r)["offline"] for r in rs],
        }
        cols["offline / (online + offline)"] = [shares(r)["offline"] / (shares(r)["online"] + shares(r)["offline"]) for r in rs]
        cols["node busy (CPUs)"] = [r["node_busy_cpus"] for r in rs]
        cols["load average"] = [r["loadavg_at_start"] for r in rs]
        rows.append([a, str(len(rs))] + [f"{sig3(statistics.median(v))} [{sig3(min(v))}–{sig3(max(v))}]" for v in cols.values()])
    table = markdown(
        ["arrangement", "n", "QPS median [min–max]", "P50 (s)", "online share of node", "offline share of node", *list(cols)[4:]], rows
    )
    print(table)
    (args.out / "summary.md").write_text(table + "\n")
    (args.out / "results.json").write_text(
        json.dumps(
            finite(
                [
                    {k: v for k, v in r.items() if not k.startswith("_")} | {"trace": {g: vars(f) for g, f in r["_trace"].items()}}
                    for r in results
                ]
            ),
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
