"""What an exchange across CPUs costs: redis-server + redis-benchmark alone, free on the host's
CPUs (the kernel keeps them apart, each on an idle CPU) and both pinned to CPU 0 (taskset), each
repeated; the server's and the generator's CPU per GET in each, and their difference: the
`cross_cpu` of experiments/fidelity/redis.toml (core_rs spec.rs `CrossCpu`).

    python experiments/cross_cpu.py [--reps 3] [--requests 600000]

Needs redis-server and redis-benchmark, at least 2 CPUs, and a quiet host (the figures are CPU
per request, which other tenants inflate through the caches they share). It makes no cgroup and
writes nothing outside a temporary directory; the server is stopped on every exit path.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PORT = 6391
HZ = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """utime + stime of a live process (s), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def wait_port(port: int, proc: subprocess.Popen) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"redis-server exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"redis-server did not listen on port {port}")


def once(pinned: bool, requests: int, tmp: str) -> tuple[float, float, float]:
    """(QPS, server µs per GET, generator µs per GET) of one run."""
    pin = ["taskset", "-c", "0"] if pinned else []
    server = subprocess.Popen(
        [*pin, "redis-server", "--port", str(PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_port(PORT, server)
        before = proc_cpu(server.pid)
        bench = subprocess.Popen(
            [*pin, "redis-benchmark", "-p", str(PORT), "-c", "10", "-t", "get", "-n", str(requests), "-q"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert bench.stdout is not None
        out = bench.stdout.read()
        _, status, usage = os.wait4(bench.pid, 0)
        bench.returncode = os.waitstatus_to_exitcode(status)
        after = proc_cpu(server.pid)
    finally:
        server.terminate()
        server.wait()
    m = re.search(r"([\d.]+) requests per second", out)
    if bench.returncode != 0 or m is None:
        sys.exit(f"redis-benchmark failed (status {bench.returncode}): {out.strip()[-200:]}")
    return float(m.group(1)), (after - before) / requests * 1e6, (usage.ru_utime + usage.ru_stime) / requests * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=600_000)
    args = ap.parse_args()
    for prog in ("redis-server", "redis-benchmark", "taskset"):
        if shutil.which(prog) is None:
            sys.exit(f"{prog} is not installed")
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs at least 2 CPUs: on one, nothing crosses")
    rows: dict[str, list[tuple[float, float, float]]] = {"apart": [], "one CPU": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            # alternated, so that a drift of the host touches both alike
            rows["apart"].append(once(False, args.requests, tmp))
            rows["one CPU"].append(once(True, args.requests, tmp))
    med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in rows.items()}
    print(f"{'':8} {'QPS':>9} {'server µs/GET':>14} {'generator µs/GET':>17}   (medians of {args.reps}; each run)")
    for k, v in rows.items():
        runs = "; ".join(f"{q:.0f} {s:.2f} {g:.2f}" for q, s, g in v)
        print(f"{k:8} {med[k][0]:9.0f} {med[k][1]:14.2f} {med[k][2]:17.2f}   {runs}")
    server = med["apart"][1] - med["one CPU"][1]
    client = med["apart"][2] - med["one CPU"][2]
    print(f'cross_cpu = {{ server = "{server:.2f}us", client = "{client:.2f}us" }}')


if __name__ == "__main__":
    main()
