"""What the hypervisor takes from a busy vCPU: the stalls of `[node.steal]`
(core_rs/model/src/steal.rs), measured.

A spinner pinned to each CPU reads the clock as fast as it can; a gap between two reads longer
than THRESHOLD_US is time the CPU was not running it. With both CPUs spinning (the guest never
halts, as beside a hog) the gaps are what the host takes from a vCPU that gives it no idle
time: measured here (2026-12-07) 2–4 a second over 100 µs on each CPU, up to 6 ms, while a
spinner that halts every 200 µs loses none. The gaps' rate per second of spinning and their
lengths' histogram are `rate` and `length`.

`after` is how long a vCPU must have run without halting before the host takes it: the
spinners run in spells of DUTY_RUN_US with DUTY_SLEEP_US sleeps between, and each gap's age
(the time since its spell began) is kept. If the host strikes at a constant rate once a spell
is `after` old, and never before, the ages are uniform on [after, spell]: the first quartile
Q gives after = (Q − spell / 4) / (3 / 4).

Gaps shorter than THRESHOLD_US (the guest's own tick and interrupts, a few µs to ~20 µs, 1,000
a second) are left out: they take ~1% of every CPU all the time, which a service's calibration
already holds. The probe creates no cgroup and writes nothing: its spinners run where colosim
runs, pinned with sched_setaffinity, and are killed on every exit path.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replay.cpuidle import BUSY_HOST, CUTS, busy_cpus, child_process, cut_histogram, histogram_mean, histogram_table, histogram_toml, pin
from sim.errors import HostError

THRESHOLD_US = 50  # a gap shorter than this is the guest's own interrupt, not a stall
SPIN_S = 5.0  # both CPUs spinning
DUTY_S = 5.0  # both CPUs in spells
DUTY_RUN_US = 4000
DUTY_SLEEP_US = 300


def _spin(seconds: float, run_us: int, sleep_us: int, threshold_ns: int, wr: int) -> None:
    """Spin for `seconds` in spells of `run_us` (sleeping `sleep_us` between; 0: one spell),
    then write what was seen: the time spun (ns), then each gap's length and age (ns)."""
    clock = time.monotonic_ns
    end = clock() + int(seconds * 1e9)
    run_ns = run_us * 1000 if sleep_us else int(seconds * 1e9)
    spun = 0
    gaps: list[int] = []
    while True:
        start = prev = clock()
        if start >= end:
            break
        stop = min(start + run_ns, end)
        while prev < stop:
            t = clock()
            if t - prev > threshold_ns:
                gaps.extend((t - prev, prev - start))
            prev = t
        spun += prev - start
        if sleep_us:
            time.sleep(sleep_us / 1e6)
    data = np.array([spun, *gaps], dtype=np.int64).tobytes()
    view = memoryview(data)
    while view:
        view = view[os.write(wr, view) :]
    os.close(wr)


def _spinners(cpus: list[int], seconds: float, run_us: int, sleep_us: int, threshold_ns: int) -> list[np.ndarray]:
    """Run one spinner on each CPU at once; each one's record (time spun, then gap, age pairs)."""
    pipes = [os.pipe() for _ in cpus]
    records = []
    with contextlib.ExitStack() as stack:
        for cpu, (_rd, wr) in zip(cpus, pipes, strict=True):

            def target(cpu: int = cpu, wr: int = wr) -> None:
                pin(cpu)
                _spin(seconds, run_us, sleep_us, threshold_ns, wr)

            stack.enter_context(child_process(target))
            os.close(wr)
        for rd, _ in pipes:
            chunks = []
            while chunk := os.read(rd, 1 << 16):
                chunks.append(chunk)
            os.close(rd)
            records.append(np.frombuffer(b"".join(chunks), dtype=np.int64))
    return records


def after_from_ages(ages_ns: np.ndarray, spell_ns: float) -> int:
    """`after` from the ages of the gaps seen in spells of `spell_ns`: uniform on [after,
    spell] has its first quartile at after + (spell − after) / 4. No gaps: 0 (nothing to tell
    a late strike from an early one)."""
    if len(ages_ns) == 0:
        return 0
    q = float(np.quantile(ages_ns, 0.25))
    return int(round(min(max((q - spell_ns / 4) / 0.75, 0.0), spell_ns)))


@dataclass(frozen=True)
class Stalls:
    """The measured stalls: their rate per CPU-second of spinning, their lengths (median, P99,
    longest, histogram, µs and ns), `after` and the counts it came from."""

    cpus: list[int]
    spun_s: float
    stalls: int
    rate_per_s: float
    p50_us: float
    p99_us: float
    max_us: float
    lost_share: float  # of the spinners' time, in gaps over the threshold
    edges_ns: list[int]
    weights: list[float]
    after_ns: int
    duty_stalls: int
    threshold_us: int = THRESHOLD_US
    others_busy_cpus: float = 0.0

    def table(self) -> dict[str, Any]:
        """`[node.steal]` as a scenario table."""
        return {
            "rate": self.rate_per_s,
            "length": histogram_table(self.edges_ns, self.weights),
            "after": f"{self.after_ns}ns",
        }

    def _fields(self) -> str:
        return f'rate = {self.rate_per_s:.6g}, length = {histogram_toml(self.edges_ns, self.weights)}, after = "{self.after_ns}ns"'

    def override(self) -> str:
        """The table as one `--set`."""
        return f"node.steal={{{self._fields()}}}"

    def toml(self) -> str:
        """`[node.steal]` as a scenario's TOML."""
        return "[node.steal]\n" + self._fields().replace(", length = ", "\nlength = ").replace(", after = ", "\nafter = ") + "\n"

    def summary(self) -> str:
        return (
            f"steal: a busy CPU loses {self.rate_per_s:.1f} gaps a second over {self.threshold_us} µs "
            f"(median {self.p50_us:.0f} µs, mean {histogram_mean(self.edges_ns, self.weights) / 1e3:.0f}, "
            f"P99 {self.p99_us:.0f}, longest {self.max_us / 1000:.2f} ms; "
            f"{self.lost_share:.2%} of its time), {self.stalls} in {self.spun_s:.1f} CPU-s of spinning on CPUs "
            f"{', '.join(map(str, self.cpus))}; they strike a CPU that has run {self.after_ns / 1000:.0f} µs without "
            f"halting (from {self.duty_stalls} gaps in {DUTY_RUN_US / 1000:g} ms spells)"
            + (
                f"; WARNING: the host was busy ({self.others_busy_cpus:.2f} CPUs of other work): its gaps are the guest's own tasks too"
                if self.others_busy_cpus > BUSY_HOST
                else ""
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stalls_from(records: list[np.ndarray], duty: list[np.ndarray], spell_ns: float, cpus: list[int], others: float) -> Stalls:
    """The figures from the spinners' records (time spun, then gap/age pairs)."""
    spun = float(sum(int(r[0]) for r in records))
    gaps = np.concatenate([r[1:][0::2] for r in records]) if records else np.empty(0, np.int64)
    ages = np.concatenate([r[1:][1::2] for r in duty]) if duty else np.empty(0, np.int64)
    if spun <= 0:
        raise HostError("steal: the spinners did not run")
    if len(gaps):
        edges, weights = cut_histogram(np.quantile(gaps.astype(np.float64), CUTS))
    else:
        # no stall seen: a rate that strikes ~never, of the threshold's length
        edges, weights = [THRESHOLD_US * 1000, THRESHOLD_US * 1000 + 1], [1.0]
    n = len(gaps)
    return Stalls(
        cpus=cpus,
        spun_s=spun / 1e9,
        stalls=n,
        rate_per_s=max(n, 0.5) / (spun / 1e9),
        p50_us=float(np.median(gaps)) / 1e3 if n else 0.0,
        p99_us=float(np.quantile(gaps, 0.99)) / 1e3 if n else 0.0,
        max_us=float(gaps.max()) / 1e3 if n else 0.0,
        lost_share=float(gaps.sum()) / spun if n else 0.0,
        edges_ns=edges,
        weights=weights,
        after_ns=after_from_ages(ages.astype(np.float64), spell_ns),
        duty_stalls=len(ages),
        others_busy_cpus=others,
    )


def measure(spin_s: float = SPIN_S, duty_s: float = DUTY_S, threshold_us: int = THRESHOLD_US) -> Stalls:
    """Measure the stalls on every CPU this process may run on: spinning, then in spells."""
    cpus = sorted(os.sched_getaffinity(0))
    others = busy_cpus()
    thr = threshold_us * 1000
    spin = _spinners(cpus, spin_s, 0, 0, thr)
    duty = _spinners(cpus, duty_s, DUTY_RUN_US, DUTY_SLEEP_US, thr)
    # the mean spell is shorter than DUTY_RUN_US only by the last, cut short at the end
    return stalls_from(spin, duty, DUTY_RUN_US * 1000.0, cpus, others)
