"""Shared hardware on the host: a service beside a cache / memory-bandwidth antagonist, with
and without CPU separation (docs/replay.md, "Shared hardware on this host").

A case is (service, antagonist, arrangement):

    service      nginx + wrk (as replay runs them, replay.workloads) or redis-server +
                 redis-benchmark GETs over a keyspace of REDIS_KEYS values of REDIS_VALUE
                 bytes (~100 MB: larger than L2, a cache-sensitive working set), or none (the
                 antagonist alone)
    antagonist   stress-ng --cache 1 / --stream 1 / --matrix 1 (--metrics-brief: its bogo
                 ops/s), stress --cpu 1 (the pure-CPU control), or none (the service alone)
    arrangement  shared — both cgroups may use both CPUs (CPU time is shared);
                 split  — service + its load generator in a cpuset of CPU 0, the antagonist
                 in a cpuset of CPU 1 (cpuset.cpus beneath our own cgroup): they never share
                 a CPU, so what still slows the service is the shared hardware (LLC, memory
                 bus, the hypervisor's other vCPUs on the same physical cores)

The antagonist and the load generator start together and run for the same `seconds`, so the
antagonist's bogo ops/s covers the service's window. Everything runs in cgroups beneath this
process's own (replay.session.Session), removed on every exit path.

The VM reports its LLC from CPUID (sysfs cache/index3): on this host 480 MiB "shared by"
both vCPUs, which is the hypervisor's figure, not a physical cache one VM owns; stress-ng
sizes --cache and --stream from it, so both are given explicit sizes (ANTAGONIST_ARGS)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.cgroup import Knob, KnobWrite
from replay.cgroupfs import HostError
from replay.session import Session, running_folder
from replay.workloads import REDIS_BATCH, parse_redis_csv, parse_wrk, redis_benchmark_argv, start_nginx, start_redis, wrk_argv

SERVICES = ("nginx", "redis")
ANTAGONISTS = ("cache", "stream", "matrix", "cpu")
ARRANGEMENTS = ("shared", "split")
NONE = "none"
# stress-ng sizes its buffers from the (virtual) L3 the VM reports (480 MiB here): --stream's
# arrays would be 4x that and one bogo op take ~30 s. --cache sweeps --cache-ways of the 16
# ways the VM reports: 2 ways, 60 MiB, of the order of a physical server's L3 (a Sapphire
# Rapids socket has 105 MB), and stays on its CPU (--cache-no-affinity: by default it hops
# CPUs); --stream's arrays (4 x l3-size each: 64 MiB) are beyond the L2 and a VM's share
# of any LLC, and small enough for ~20 bogo ops per CPU-second (a countable rate in 6 s).
ANTAGONIST_ARGS = {
    "cache": ["stress-ng", "--cache", "1", "--cache-ways", "2", "--cache-no-affinity"],
    "stream": ["stress-ng", "--stream", "1", "--stream-l3-size", "16M"],
    "matrix": ["stress-ng", "--matrix", "1"],
    "cpu": ["stress", "--cpu", "1"],
}
WRK_CLIENTS = 16
REDIS_CLIENTS = 16
REDIS_KEYS = 100_000
REDIS_VALUE = 1000  # bytes: ~100 MB of values
SPLIT_CPUS = {"svc": "0", "ant": "1"}


@dataclass(frozen=True)
class Case:
    service: str  # SERVICES or NONE
    antagonist: str  # ANTAGONISTS or NONE
    arrangement: str

    @property
    def key(self) -> str:
        return f"{self.service}/{self.antagonist}/{self.arrangement}"


def cases(
    services: Iterable[str] = SERVICES, antagonists: Iterable[str] = ANTAGONISTS, arrangements: Iterable[str] = ARRANGEMENTS
) -> list[Case]:
    """Every service alone and beside every antagonist, and every stress-ng antagonist alone
    (its bogo ops/s reference), in each arrangement."""
    ants = list(antagonists)
    out = []
    for arr in arrangements:
        for svc in services:
            out += [Case(svc, a, arr) for a in (NONE, *ants)]
        out += [Case(NONE, a, arr) for a in ants if a != "cpu"]
    return out


def parse_metrics_brief(text: str, stressor: str) -> tuple[float | None, float | None]:
    """stress-ng --metrics-brief: the stressor's row "stress-ng: metrc: [pid] NAME bogo-ops
    real usr sys ops/s(real) ops/s(usr+sys)": bogo ops per second of real time and per
    second of CPU (usr + sys)."""
    for line in text.splitlines():
        m = re.search(rf"\]\s+{re.escape(stressor)}\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            return float(m.group(5)), float(m.group(6))
    return None, None


def host_cache() -> dict[str, Any]:
    """What the VM says about its caches and topology (sysfs cache/index*, lscpu's model,
    hypervisor, sockets, cores, threads)."""
    caches = []
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for d in sorted(base.glob("index*")):

        def get(name: str, d: Path = d) -> str:
            try:
                return (d / name).read_text().strip()
            except OSError:
                return ""

        caches.append({"level": get("level"), "type": get("type"), "size": get("size"), "shared_cpu_list": get("shared_cpu_list")})
    lscpu: dict[str, str] = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in (
                "Model name",
                "Hypervisor vendor",
                "Socket(s)",
                "Core(s) per socket",
                "Thread(s) per core",
                "CPU(s)",
                "L3 cache",
                "L2 cache",
            ):
                lscpu[k.strip()] = v.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"caches": caches, "lscpu": lscpu}


class Bench:
    """One session's cgroups (shared/svc, shared/ant, split/svc on CPU 0, split/ant on CPU 1)
    and the runs in them."""

    def __init__(self, session: Session, seconds: float, say: Callable[[str], Any]) -> None:
        if len(os.sched_getaffinity(0)) < 2:
            raise HostError("the split arrangement needs 2 CPUs (service on CPU 0, antagonist on CPU 1)")
        self.s = session
        self.seconds = seconds
        self.say = say
        session.backend.create([f"{a}/{r}" for a in ARRANGEMENTS for r in ("svc", "ant")])
        session.backend.apply([KnobWrite(f"split/{r}", Knob.CPUSET_CPUS, cpu) for r, cpu in SPLIT_CPUS.items()])
        self._n = 0

    def _tmp(self) -> Path:
        self._n += 1
        d = self.s.run_dir() / f"case{self._n}"
        d.mkdir()
        return d

    def run(self, case: Case) -> dict[str, Any]:
        """Start the service's server, then the antagonist and the load generator together for
        `seconds`; the service's rate (requests/s) and the antagonist's (bogo ops/s)."""
        svc_cg, ant_cg = f"{case.arrangement}/svc", f"{case.arrangement}/ant"
        tmp = self._tmp()
        try:
            gen = self._server(case.service, svc_cg, tmp) if case.service != NONE else None
            ant = None
            if case.antagonist != NONE:
                argv = [*ANTAGONIST_ARGS[case.antagonist], "--timeout", f"{self.seconds:g}s"]
                if argv[0] == "stress-ng":
                    argv.append("--metrics-brief")
                ant = self.s.spawn(argv, ant_cg, stdout=open(tmp / "ant.out", "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
            t0 = time.monotonic()
            u0 = {cg: self.s.backend.stats(cg).usage_ns for cg in (svc_cg, ant_cg)}
            p0 = {cg: self.s.backend.percpu_usage(cg) or [] for cg in (svc_cg, ant_cg)}
            g = self.s.spawn(gen, svc_cg, stdout=open(tmp / "gen.out", "w"), stderr=subprocess.STDOUT) if gen else None  # noqa: SIM115
            for p in (g, ant):
                if p is not None:
                    p.wait(timeout=self.seconds + 30)
            if ant is not None and ant.returncode != 0:
                said = (tmp / "ant.out").read_text()[-300:]
                raise HostError(f"{case.key}: {' '.join(ANTAGONIST_ARGS[case.antagonist])} failed (status {ant.returncode}): {said}")
            wall = time.monotonic() - t0
            # the generator's window: CPU·s/s each cgroup got (cpuacct.usage; the server's
            # and generator's together for the service)
            cpu = {cg: (self.s.backend.stats(cg).usage_ns - u) / 1e9 / wall for cg, u in u0.items()}
            # per CPU (cpuacct.usage_percpu): where each cgroup ran — the split's cpusets say
            # the service only on CPU 0, the antagonist only on CPU 1
            percpu = {
                cg: [round((b - a) / 1e9 / wall, 4) for a, b in zip(p0[cg], self.s.backend.percpu_usage(cg) or [], strict=False)]
                for cg in p0
            }
            out: dict[str, Any] = {"case": case.key, "wall_s": round(wall, 3), "loadavg": Path("/proc/loadavg").read_text().split()[0]}
            if gen is not None:
                text = (tmp / "gen.out").read_text()
                r = (
                    parse_wrk(case.service, text, self.seconds)
                    if case.service == "nginx"
                    else parse_redis_csv(case.service, text, self.seconds, REDIS_BATCH)
                )
                out["service_rps"] = r.reported_qps
                out["service_p99_ms"] = (r.reported or {}).get(99.0, float("nan")) * 1e3
                out["service_cpu"] = round(cpu[svc_cg], 4)
                out["service_percpu"] = percpu[svc_cg]
                # requests per CPU-second of server + generator: what the shared hardware
                # changes, whatever CPU time the rest of this busy host left the service
                out["service_per_cpu_s"] = r.reported_qps / cpu[svc_cg] if cpu[svc_cg] > 0 else None
            if ant is not None and case.antagonist != "cpu":
                real, per_cpu = parse_metrics_brief((tmp / "ant.out").read_text(), case.antagonist)
                out["antagonist_bogo_ops_s"], out["antagonist_per_cpu_s"] = real, per_cpu
            if ant is not None:
                out["antagonist_cpu"] = round(cpu[ant_cg], 4)
                out["antagonist_percpu"] = percpu[ant_cg]
            return out
        finally:
            self.s.kill_all()

    def _server(self, service: str, cg: str, tmp: Path) -> list[str]:
        """Start the server in `cg`; the generator's argv (its duration `seconds`)."""
        if service == "nginx":
            port = start_nginx(self.s, tmp, cg)
            assert port is not None  # never a dry run
            return wrk_argv(WRK_CLIENTS, self.seconds, f"http://127.0.0.1:{port}/")
        port = start_redis(self.s, tmp, cg)
        assert port is not None
        # the working set: every key of the keyspace written (pipelined), before the window
        fill = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-r", str(REDIS_KEYS), "-n", str(4 * REDIS_KEYS)]
        fill += ["-d", str(REDIS_VALUE), "-P", "32", "-q"]
        filled = self.s.spawn(fill, cg)
        if filled.wait(timeout=120) != 0:
            raise HostError(f"redis-benchmark could not fill the keyspace (status {filled.returncode})")
        return redis_benchmark_argv(port, REDIS_CLIENTS, self.seconds, "get", keys=REDIS_KEYS)


def wait_for_other_replays(say: Callable[[str], Any], timeout_s: float) -> None:
    """Another replay holds the lock (two would measure each other): wait for it to end."""
    deadline = time.monotonic() + timeout_s
    said = False
    while (run := running_folder()) is not None:
        if time.monotonic() > deadline:
            raise HostError(f"another replay ({run}) still runs after {timeout_s:.0f} s of waiting")
        if not said:
            say(f"waiting for another replay ({run}) to finish")
            said = True
        time.sleep(5)


def measure(
    case_list: list[Case], reps: int, seconds: float, seed: int, say: Callable[[str], Any], wait_s: float = 0.0
) -> list[dict[str, Any]]:
    """`reps` rounds; each round runs every case once, in an order shuffled by `seed` and the
    round, so the busy host's load falls on all cases alike. Each row carries its round."""
    rows = []
    wait_for_other_replays(say, wait_s)
    with Session(log=say) as s:
        bench = Bench(s, seconds, say)
        for rnd in range(reps):
            order = list(case_list)
            random.Random(seed * 1000 + rnd).shuffle(order)
            for case in order:
                row = bench.run(case)
                row["round"] = rnd
                shown = {k: v for k, v in row.items() if k not in ("case", "round")}
                say(f"round {rnd} {case.key}: {shown}")
                rows.append(row)
    return rows


# ratio name -> (whose, the row's field)
RATIOS = {
    "service": ("service", "service_rps"),
    "service_per_cpu": ("service", "service_per_cpu_s"),
    "antagonist": ("antagonist", "antagonist_bogo_ops_s"),
    "antagonist_per_cpu": ("antagonist", "antagonist_per_cpu_s"),
}


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Per case and round: the service's rate over the service alone in the same arrangement
    and round, and the antagonist's over the antagonist alone likewise — per second of wall
    time ("service", "antagonist") and per second of the CPU it got ("..._per_cpu").
    {case: {ratio name: [one per round]}}."""
    by = {(r["case"], r["round"]): r for r in rows}
    out: dict[str, dict[str, list[float]]] = {}
    for (key, rnd), r in sorted(by.items()):
        svc, ant, arr = key.split("/")
        if NONE in (svc, ant):
            continue
        entry = out.setdefault(key, {name: [] for name in RATIOS})
        for name, (whose, field) in RATIOS.items():
            alone_key = f"{svc}/{NONE}/{arr}" if whose == "service" else f"{NONE}/{ant}/{arr}"
            alone, value = by.get((alone_key, rnd), {}).get(field), r.get(field)
            if alone and value is not None:
                entry[name].append(value / alone)
    return out
