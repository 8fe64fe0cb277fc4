"""A pure-Python stand-in for `sim._core.Node`, so the Python front can be tested before (and
without) the Rust extension.  It follows the contract in sim/_core.pyi, not the physics:
each cgroup uses CPU at a fixed rate and each service completes requests at a fixed period
with a deterministic spread of latencies.  It records every `run_until` call.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np


class FakeNode:
    def __init__(self, spec_json: str) -> None:
        spec = json.loads(spec_json)
        topo = spec["topology"]
        self.ncpus = topo["sockets"] * topo["cores_per_socket"] * topo["threads_per_core"]
        self.spec = spec
        self.calls: list[int] = []
        self._now = 0
        self._reset_at = 0
        self._cgroups = [""] + [c["name"] for c in spec["cgroups"]]
        self._knobs = {c["name"]: {k: c[k] for k in ("cpu.shares", "cpu.idle", "cpu.qos_level")} for c in spec["cgroups"]}
        self._services = [w for w in spec["workloads"] if w["kind"] != "hog"]
        # CPUs each leaf cgroup keeps busy: services half a CPU each, hogs one per thread,
        # all capped at the node's size.
        demand = {c: 0.0 for c in self._cgroups}
        for w in spec["workloads"]:
            demand[w["cgroup"]] += w["threads"] if w["kind"] == "hog" else 0.5
        total = sum(demand.values())
        scale = min(1.0, self.ncpus / total) if total else 1.0
        self._rate = {c: d * scale for c, d in demand.items()}
        self._sample = spec["sample_interval_ns"]

    # -- time

    def run_until(self, t_ns: int) -> None:
        if not isinstance(t_ns, int):
            raise TypeError("t_ns must be an int")
        if t_ns < self._now:
            raise ValueError(f"run_until: t_ns {t_ns} is before now {self._now}")
        self.calls.append(t_ns)
        self._now = t_ns

    def now(self) -> int:
        return self._now

    def reset_stats(self) -> None:
        self._reset_at = self._now

    # -- names and knobs

    def cgroup_names(self) -> list[str]:
        return list(self._cgroups)

    def service_names(self) -> list[str]:
        return [w["name"] for w in self._services]

    def write(self, cgroup: str, knob: str, value: int) -> None:
        if cgroup not in self._knobs:
            raise KeyError(f'no cgroup named "{cgroup}"')
        if knob not in self._knobs[cgroup]:
            raise KeyError(f'unknown knob "{knob}"')
        self._knobs[cgroup][knob] = value

    def read(self, cgroup: str, knob: str) -> int:
        return self._knobs[cgroup][knob]

    # -- stats

    def _usage(self, cgroup: str, t0: int, t1: int) -> int:
        rate = sum(r for c, r in self._rate.items() if c == cgroup or c.startswith(cgroup + "/"))
        if cgroup == "":
            rate = sum(self._rate.values())
        return round(rate * (t1 - t0))

    def cgroup_stats(self, cgroup: str) -> dict[str, int]:
        if cgroup not in self._cgroups:
            raise KeyError(f'no cgroup named "{cgroup}"')
        usage = self._usage(cgroup, self._reset_at, self._now)
        return {
            "usage_ns": usage,
            "wait_ns": usage // 10,
            "nr_switches": usage // 1_000_000,
            "nr_running": 0,
            "nr_tasks": 0,
            # no bandwidth control in the fake: cpu.stat stays zero
            "nr_periods": 0,
            "nr_throttled": 0,
            "throttled_time": 0,
            "nr_bursts": 0,
            "burst_time": 0,
            "psi_some_ns": usage // 20,
            "psi_full_ns": 0,
        }

    def runqlat(self, cgroup: str) -> list[int]:
        if cgroup not in self._cgroups:
            raise KeyError(f'no cgroup named "{cgroup}"')
        return [0] * 24  # the fake schedules nothing: no wakeups

    def run_segments(self, cgroup: str) -> dict[str, list[int]]:
        if cgroup not in self._cgroups:
            raise KeyError(f'no cgroup named "{cgroup}"')
        return {k: [0] * 24 for k in ("preempted", "blocked", "preempted_wait")}

    def runnable_time(self, cgroup: str) -> list[list[int]]:
        if cgroup not in self._cgroups:
            raise KeyError(f'no cgroup named "{cgroup}"')
        return [[0] * 16 for _ in range(self.ncpus)]  # the fake schedules no queue

    def _period(self, w: dict[str, Any]) -> int:
        return 50_000_000 if w["kind"] == "closed_loop" else round(1e9 / w["rate_per_s"])

    def _completions(self, w: dict[str, Any], t0: int, t1: int) -> np.ndarray:
        period = self._period(w)
        k0 = t0 // period + 1
        k1 = t1 // period
        return np.arange(k0, k1 + 1, dtype=np.uint64) * np.uint64(period)

    def _service(self, name: str) -> dict[str, Any]:
        for w in self._services:
            if w["name"] == name:
                return w
        raise KeyError(f'no service named "{name}"')

    def service_stats(self, name: str) -> dict[str, int]:
        done = len(self._completions(self._service(name), self._reset_at, self._now))
        return {"started": done + 1, "completed": done}

    def service_latencies(self, name: str) -> bytes:
        n = len(self._completions(self._service(name), self._reset_at, self._now))
        # 1 ms .. 100 ms in a repeating pattern: percentiles are easy to compute by hand
        lat = (np.arange(n, dtype=np.uint64) % 100 + 1) * np.uint64(1_000_000)
        return lat.astype("<u8").tobytes()

    def service_completions(self, name: str) -> bytes:
        times = self._completions(self._service(name), self._reset_at, self._now)
        return times.astype("<u8").tobytes()

    def cpu_busy(self) -> bytes:
        matrix = np.zeros((self.ncpus, len(self._cgroups)), dtype=np.uint64)
        for i, c in enumerate(self._cgroups):
            if c:
                own = round(self._rate[c] * (self._now - self._reset_at))
                matrix[:, i] = own // self.ncpus
        return matrix.astype("<u8").tobytes()

    def memory_stats(self) -> None:
        return None  # the fake models no memory

    def oom_kills(self) -> dict[str, int]:
        return {}

    def timeseries(self) -> dict[str, Any]:
        if not self._sample:
            t = np.zeros(0, dtype=np.uint64)
        else:
            t = np.arange(self._sample, self._now + 1, self._sample, dtype=np.uint64)
        usage = np.array([[self._usage(c, 0, int(x)) for c in self._cgroups] for x in t], dtype=np.uint64).reshape(
            len(t), len(self._cgroups)
        )
        done = np.array(
            [[len(self._completions(w, 0, int(x))) for w in self._services] for x in t],
            dtype=np.uint64,
        ).reshape(len(t), len(self._services))
        return {
            "t_ns": t.astype("<u8").tobytes(),
            "usage_ns": usage.astype("<u8").tobytes(),
            "completed": done.astype("<u8").tobytes(),
            "nr_throttled": np.zeros(usage.shape, dtype="<u8").tobytes(),
            "throttled_ns": np.zeros(usage.shape, dtype="<u8").tobytes(),
            "memory_bytes": b"",
        }

    def events(self) -> int:
        return len(self.calls)
