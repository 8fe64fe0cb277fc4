"""`colosim record`: sample real cgroups' CPU and memory into the trace format. Read-only:
it opens the cgroups' files and writes nothing on the host but its output file.

A cgroup is named by its path in the hierarchy, as /proc/PID/cgroup shows it
("/kubepods/burstable/pod-x"). On cgroup v1 the CPU comes from the cpuacct controller's
cpuacct.usage (ns) and the memory from the memory controller's memory.usage_in_bytes; on v2
from cpu.stat usage_usec and memory.current. CPU used over an interval = Δusage / Δt, in
cores; memory is the level at the interval's end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from traces.format import ROLES, Entity, Trace, TraceError


def mounts(text: str | None = None) -> dict[str, Path]:
    """{controller or "unified": mount point} from /proc/mounts."""
    text = Path("/proc/mounts").read_text() if text is None else text
    out: dict[str, Path] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        where, fstype, options = Path(parts[1]), parts[2], parts[3].split(",")
        if fstype == "cgroup2":
            out.setdefault("unified", where)
        elif fstype == "cgroup":
            for c in ("cpuacct", "memory"):
                if c in options:
                    out.setdefault(c, where)
    return out


@dataclass(frozen=True)
class Source:
    """Where one cgroup's counters are read."""

    name: str
    role: str
    cpu_file: Path
    cpu_scale_ns: float  # cpuacct.usage is ns; cpu.stat usage_usec is µs
    memory_file: Path | None

    def cpu_ns(self) -> float:
        text = self.cpu_file.read_text()
        if self.cpu_file.name == "cpu.stat":
            for line in text.splitlines():
                k, _, v = line.partition(" ")
                if k == "usage_usec":
                    return float(v) * self.cpu_scale_ns
            raise TraceError(f"{self.cpu_file}: no usage_usec line")
        return float(text.strip()) * self.cpu_scale_ns

    def memory(self) -> float:
        if self.memory_file is None or not self.memory_file.exists():
            return float("nan")
        return float(self.memory_file.read_text().strip())


def source(spec: str, m: dict[str, Path]) -> Source:
    """`PATH` or `PATH=ROLE` → where to read it (v1 when cpuacct is mounted, else v2)."""
    path, _, role = spec.partition("=")
    role = role or "online"
    if role not in ROLES:
        raise TraceError(f"--cgroup {spec}: role must be one of {', '.join(ROLES)}")
    rel = path.strip().lstrip("/")
    if "cpuacct" in m:
        cpu = m["cpuacct"] / rel / "cpuacct.usage"
        mem = m["memory"] / rel / "memory.usage_in_bytes" if "memory" in m else None
        scale = 1.0
    elif "unified" in m:
        cpu = m["unified"] / rel / "cpu.stat"
        mem = m["unified"] / rel / "memory.current"
        scale = 1000.0
    else:
        raise TraceError("no cgroup hierarchy with CPU accounting is mounted (cpuacct on v1, or cgroup2)")
    if not cpu.exists():
        raise TraceError(f"--cgroup {path}: no such cgroup ({cpu} does not exist)")
    return Source("/" + rel, role, cpu, scale, mem)


def record(sources: list[Source], interval_s: float, duration_s: float, sleep=time.sleep, clock=time.monotonic) -> Trace:
    """Sample every `interval_s` for `duration_s`; the first sample is the baseline."""
    if interval_s <= 0 or duration_s < interval_s:
        raise TraceError(f"--interval must be > 0 and --duration at least one interval (got {interval_s:g} s, {duration_s:g} s)")
    t0 = clock()
    prev = [s.cpu_ns() for s in sources]
    last = t0
    ts: list[float] = []
    cpu: list[list[float]] = [[] for _ in sources]
    mem: list[list[float]] = [[] for _ in sources]
    n = int(duration_s / interval_s + 1e-9)
    for k in range(1, n + 1):
        sleep(max(0.0, t0 + k * interval_s - clock()))
        now = clock()
        dt = now - last
        ts.append(now - t0)
        for i, s in enumerate(sources):
            u = s.cpu_ns()
            cpu[i].append(max(0.0, (u - prev[i]) / 1e9 / dt) if dt > 0 else 0.0)
            prev[i] = u
            mem[i].append(s.memory())
        last = now
    trace = Trace(source=f"colosim record, every {interval_s:g} s")
    for i, s in enumerate(sources):
        m = np.array(mem[i])
        trace.add(Entity(s.name, s.role, np.array(ts), np.array(cpu[i]), None if np.isnan(m).all() else m))
    return trace
