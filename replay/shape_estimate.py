"""A service's request shape from the kernel's per-thread counters and its load generator's report.

`colosim shape` (replay/shape.py) drives a real service and reads, for every thread of its
cgroup, /proc/PID/task/TID/schedstat (run ns, run-queue wait ns, timeslices) and .../status
(voluntary_ctxt_switches, nonvoluntary_ctxt_switches). This module turns those counters into
the closed-loop workload's fields (pure functions, tested on hand-worked series):

    fanout   threads that work on one request: the CPU-weighted mean, over short sample
             intervals, of the inverse Simpson index (sum x)^2 / sum x^2 of the threads' run
             time in the interval — 1 for one thread, k for k threads sharing it evenly
    service  CPU per request per thread: the cgroup's CPU (less the idle service's) / requests / fanout
    bursts   CPU bursts per request on a thread: a thread ends a burst by blocking, which the
             kernel counts as a voluntary context switch (kernel/sched/core.c: __schedule with
             a task that is no longer runnable). Per request and thread s = voluntary switches
             / requests / fanout = (B − 1) + f: B − 1 blocks inside the request, and one more
             when the thread finishes before the next request is there, for a fraction f of
             requests (f → 1 on a slow client, → 0 when the next request is always waiting).
             f is not seen, so B = 1 + floor(s − F_MIN): right whenever f >= F_MIN
    wait     sleep between two bursts: what the latency leaves when the thread's CPU and its
             run-queue wait (schedstat's second field) are taken out, over the B - 1 gaps

Counters of the idle service (its background threads' timers) over a window before the load
are subtracted at their rate. The per-request distribution's family comes from the load
generator's latency quantiles (the counters give means only): each family the core has is
fitted to them, judged by its quantile error and KS distance, and the best is scaled to the
measured CPU mean; none within FIT_TOLERANCE → an empirical histogram of the quantiles.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from sim.duration import format_duration
from sim.reported import wrk_interval_us
from sim.scenario.workloads import Rearm

# a family fits when its quantiles lie within this fraction of the mean of the measured ones
FIT_TOLERANCE = 0.10
# bursts: the least share of requests assumed to end with the thread blocking for the next
F_MIN = 0.05
# the quantile error is judged over the body of the distribution (its tails rest on few requests)
BODY = (5.0, 95.0)


@dataclass(frozen=True)
class ThreadCounters:
    """One thread's (or a sum of threads') scheduler counters."""

    run_ns: int = 0  # schedstat 1: time on a CPU
    wait_ns: int = 0  # schedstat 2: time runnable on a run queue, not running
    slices: int = 0  # schedstat 3: timeslices run
    voluntary: int = 0  # status: voluntary_ctxt_switches (blocked)
    involuntary: int = 0  # status: nonvoluntary_ctxt_switches (preempted)

    def __add__(self, o: ThreadCounters) -> ThreadCounters:
        return ThreadCounters(*(a + b for a, b in zip(astuple(self), astuple(o), strict=True)))

    def __sub__(self, o: ThreadCounters) -> ThreadCounters:
        return ThreadCounters(*(a - b for a, b in zip(astuple(self), astuple(o), strict=True)))


def astuple(c: ThreadCounters) -> tuple[int, ...]:
    return (c.run_ns, c.wait_ns, c.slices, c.voluntary, c.involuntary)


def counter_delta(before: Mapping[int, ThreadCounters], after: Mapping[int, ThreadCounters]) -> ThreadCounters:
    """The threads' counters summed over a window: threads born in it count from zero, threads
    that died in it are lost (their last counts are not readable)."""
    total = ThreadCounters()
    for tid, c in after.items():
        total = total + (c - before.get(tid, ThreadCounters()))
    return total


def parallelism(intervals: Sequence[Sequence[float]]) -> float:
    """Threads that work at once: for each sample interval, the inverse Simpson index of the
    threads' run time in it, (Σx)²/Σx², weighted by the interval's CPU. 1.0 when one thread
    ran per interval, k when k threads ran equal amounts; NaN when nothing ran."""
    num = den = 0.0
    for row in intervals:
        x = np.asarray(row, dtype=np.float64)
        x = x[x > 0]
        total = float(x.sum())
        if total <= 0:
            continue
        num += total * total**2 / float((x * x).sum())
        den += total
    return num / den if den > 0 else math.nan


def mean_from_quantiles(quantiles: Mapping[float, float]) -> float:
    """The mean of a distribution given by quantiles (percentile -> value): ∫Q(p)dp by the
    trapezoid rule, Q held flat beyond the lowest and highest reported percentile."""
    ps = sorted(quantiles)
    if not ps:
        return math.nan
    p = np.array([0.0, *ps, 100.0])
    q = np.array([quantiles[ps[0]], *(quantiles[x] for x in ps), quantiles[ps[-1]]])
    return float(np.sum((q[1:] + q[:-1]) / 2 * np.diff(p)) / 100.0)


def wrk_uncorrected(corrected: Mapping[int, int], runtime_us: int, requests: int, connections: int) -> dict[int, int]:
    """wrk's latency histogram (µs -> count) as measured, before its correction for
    coordinated omission: at the end of a run wrk 4 (src/wrk.c, src/stats.c stats_correct)
    takes e = runtime / (requests / connections) — the mean time between one connection's
    requests, in integer µs as wrk divides — and for every recorded latency n >= 2e adds
    synthetic samples at n − e, n − 2e, ... while they are > e. On a busy host one 5 ms stall
    of a 10 µs service adds hundreds of them. Added only below n, so undone from the top down."""
    e = wrk_interval_us(runtime_us, requests, connections)
    if e <= 0:
        return dict(corrected)
    added: dict[int, int] = {}
    out: dict[int, int] = {}
    for n in sorted(corrected, reverse=True):
        orig = corrected[n] - added.get(n, 0)
        if orig > 0:
            out[n] = orig
        if orig > 0 and n >= 2 * e:
            m = n - e
            while m > e:
                added[m] = added.get(m, 0) + orig
                m -= e
    return dict(sorted(out.items()))


def histogram_quantiles(hist: Mapping[int, int], unit_s: float, ps: Sequence[float]) -> dict[float, float]:
    """Quantiles of a histogram (value -> count): the smallest value with at least p% of the
    counts at or below it (p = 0: the smallest value, p = 100: the largest)."""
    values = np.array(sorted(hist), dtype=np.float64)
    cum = np.cumsum([hist[v] for v in sorted(hist)])
    out = {}
    for p in ps:
        i = int(np.searchsorted(cum, max(1.0, p / 100 * cum[-1]), side="left"))
        out[float(p)] = float(values[min(i, len(values) - 1)]) * unit_s
    return out


@dataclass
class Window:
    """What one driven (or idle) window measured."""

    seconds: float
    threads: ThreadCounters  # service threads' counters, summed, over the window
    cpu_ns: int  # the service cgroup's CPU (cpuacct: threads that died included)
    requests: int = 0
    clients: int = 0
    latency_mean_s: float = math.nan  # the load generator's mean latency
    quantiles: dict[float, float] = field(default_factory=dict)  # percentile -> latency (s)
    generator_cpu_ns: int = 0  # the load generator's own CPU (it shares the node)
    parallelism: float = math.nan
    samples: int = 0  # sweeps of the threads' run time (parallelism rests on them)
    nthreads: int = 0  # service threads seen
    cpus: dict[int, int] = field(default_factory=dict)  # CPU -> service threads last seen on it


@dataclass
class Shape:
    """A service's request shape, as the closed_loop workload's fields and the raw figures."""

    requests: int
    qps: float
    fanout: int
    parallelism: float
    cpu_per_request_s: float  # per thread
    bursts: int
    switches_per_request: float  # voluntary switches per request per thread (bursts before rounding)
    runqueue_wait_s: float  # per request per thread
    latency_mean_s: float
    wait_s: float  # between two bursts
    wait_note: str
    involuntary_per_request: float
    generator_cpu_per_request_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate(w: Window, idle: Window | None) -> Shape:
    """A driven window's shape, the idle service's counters taken out at their rate."""
    if w.requests <= 0:
        raise ValueError("the load generator completed no request")
    scale = w.seconds / idle.seconds if idle is not None and idle.seconds > 0 else 0.0
    base = idle.threads if idle is not None else ThreadCounters()
    base_cpu = idle.cpu_ns if idle is not None else 0
    cpu_ns = max(0.0, w.cpu_ns - base_cpu * scale)
    vol = max(0.0, w.threads.voluntary - base.voluntary * scale)
    invol = max(0.0, w.threads.involuntary - base.involuntary * scale)
    rq_wait = max(0.0, w.threads.wait_ns - base.wait_ns * scale)
    fanout = max(1, round(w.parallelism)) if math.isfinite(w.parallelism) else 1
    per = w.requests * fanout
    cpu = cpu_ns / per / 1e9
    switches = vol / per
    bursts = bursts_from_switches(switches)
    wait_rq = rq_wait / per / 1e9
    latency = w.latency_mean_s if math.isfinite(w.latency_mean_s) else mean_from_quantiles(w.quantiles)
    wait, note = between_bursts(latency, cpu, wait_rq, bursts)
    return Shape(
        requests=w.requests,
        qps=w.requests / w.seconds,
        fanout=fanout,
        parallelism=w.parallelism,
        cpu_per_request_s=cpu,
        bursts=bursts,
        switches_per_request=switches,
        runqueue_wait_s=wait_rq,
        latency_mean_s=latency,
        wait_s=wait,
        wait_note=note,
        involuntary_per_request=invol / per,
        generator_cpu_per_request_s=w.generator_cpu_ns / w.requests / 1e9,
    )


@dataclass
class Crossing:
    """What an exchange across CPUs costs (the closed loop's `cross_cpu`), from passes with the
    service and its generator free on the host's CPUs and passes with both on one CPU."""

    server_s: float  # a request, per server thread
    client_s: float  # a reply, to the generator
    free_server_s: float
    one_cpu_server_s: float
    free_client_s: float
    one_cpu_client_s: float
    passes: tuple[int, int]  # (free, one CPU)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def crossing(free: Sequence[Shape], one_cpu: Sequence[Shape], fanout: int) -> Crossing:
    """Medians over each kind of pass of the server's CPU per request (its cgroup's, per the
    free passes' `fanout` threads: on one CPU the threads' parallelism says nothing) and the
    generator's; each cost is the free passes' less the one-CPU passes', never below 0 (a
    service whose exchanges cost nothing more apart)."""
    if not free or not one_cpu:
        raise ValueError("crossing: needs passes free and on one CPU")

    def med(xs: Sequence[Shape], get: Any) -> float:
        return statistics.median(get(x) for x in xs)

    # each pass's per-thread CPU times its own fanout is its server CPU per request
    fs, os_ = med(free, lambda x: x.cpu_per_request_s * x.fanout) / fanout, med(one_cpu, lambda x: x.cpu_per_request_s * x.fanout) / fanout
    fc, oc = med(free, lambda x: x.generator_cpu_per_request_s), med(one_cpu, lambda x: x.generator_cpu_per_request_s)
    return Crossing(max(0.0, fs - os_), max(0.0, fc - oc), fs, os_, fc, oc, (len(free), len(one_cpu)))


def bursts_from_switches(switches: float, f_min: float = F_MIN) -> int:
    """Bursts per request from voluntary switches per request: s = (B − 1) + f, f in [0, 1]
    the share of requests after which the thread blocked for the next one (see the module's
    docstring); f >= f_min assumed."""
    return 1 + max(0, math.floor(switches - f_min + 1e-9))  # f == f_min counts (float sums)


def between_bursts(latency_s: float, cpu_s: float, runqueue_s: float, bursts: int) -> tuple[float, str]:
    """(latency − CPU − run-queue wait) / (bursts − 1): the time a request's thread is blocked,
    shared among the gaps between its bursts; with one burst there is no gap."""
    if bursts <= 1:
        return 0.0, "one burst per request: no wait between bursts"
    blocked = latency_s - cpu_s - runqueue_s
    if blocked < 0:
        return 0.0, f"latency − CPU − run-queue wait is {blocked * 1e3:.3g} ms < 0 (counted as 0)"
    return blocked / (bursts - 1), ""


# --- the distribution of CPU per request ----------------------------------------------------


@dataclass
class Candidate:
    family: str  # constant | exponential | lognormal (the core's families)
    sigma: float  # lognormal's; NaN for the others
    quantile_error: float  # max |Q_fit(p) − Q(p)| / mean over p in BODY
    ks: float  # max |F_fit(Q(p)) − p| over the reported percentiles


@dataclass
class Fit:
    candidates: list[Candidate]
    chosen: dict[str, Any]  # the TOML inline table (durations as strings)
    fits: bool  # False: no family within FIT_TOLERANCE, `chosen` is empirical
    npoints: int

    @property
    def best(self) -> Candidate:
        return min(self.candidates, key=lambda c: c.quantile_error)


def _cdf(family: str, mean: float, sigma: float, x: np.ndarray) -> np.ndarray:
    if family == "constant":
        return (x >= mean).astype(np.float64)
    if family == "exponential":
        return stats.expon.cdf(x, scale=mean)
    return stats.lognorm.cdf(x, s=sigma, scale=mean * math.exp(-(sigma**2) / 2))


def _ppf(family: str, mean: float, sigma: float, p: np.ndarray) -> np.ndarray:
    if family == "constant":
        return np.full_like(p, mean)
    if family == "exponential":
        return stats.expon.ppf(p, scale=mean)
    return stats.lognorm.ppf(p, s=sigma, scale=mean * math.exp(-(sigma**2) / 2))


def fit_lognormal_sigma(quantiles: Mapping[float, float]) -> float:
    """σ of a lognormal through the quantiles: log Q(p) = μ + σ·Φ⁻¹(p), a straight line in the
    normal score (least squares; ≥ 0)."""
    ps = np.array([p for p in sorted(quantiles) if 0 < p < 100 and quantiles[p] > 0])
    if len(ps) < 2:
        return 0.0
    z = stats.norm.ppf(ps / 100)
    logq = np.log([quantiles[p] for p in ps])
    if np.ptp(logq) == 0:
        return 0.0
    return max(0.0, float(stats.linregress(z, logq).slope))


def fit_service(quantiles: Mapping[float, float], mean_s: float, tolerance: float = FIT_TOLERANCE) -> Fit:
    """Fit each family the core has to the latency quantiles (each with the quantiles' own mean),
    and give the best one, scaled to `mean_s`, as a distribution table; empirical when none
    fits. The spread is thus assumed proportional: CPU per request varies as latency does."""
    inner = {p: v for p, v in quantiles.items() if 0 < p < 100}
    if not inner:
        raise ValueError("the load generator reported no latency quantiles")
    ps = np.array(sorted(inner))
    q = np.array([inner[p] for p in ps])
    m = mean_from_quantiles(quantiles)
    body = (ps >= BODY[0]) & (ps <= BODY[1])
    if not body.any():
        body = np.ones_like(ps, dtype=bool)
    candidates = []
    for family in ("constant", "exponential", "lognormal"):
        sigma = fit_lognormal_sigma(inner) if family == "lognormal" else math.nan
        qfit = _ppf(family, m, sigma, ps / 100)
        err = float(np.max(np.abs(qfit[body] - q[body])) / m)
        ks = float(np.max(np.abs(_cdf(family, m, sigma, q) - ps / 100)))
        candidates.append(Candidate(family, sigma, err, ks))
    best = min(candidates, key=lambda c: c.quantile_error)
    fits = best.quantile_error <= tolerance
    mean_ns = _ns(mean_s)
    if not fits:
        chosen = empirical(quantiles, mean_s / m)
    elif best.family == "constant":
        chosen = {"dist": "constant", "value": format_duration(mean_ns)}
    elif best.family == "exponential":
        chosen = {"dist": "exponential", "mean": format_duration(mean_ns)}
    else:
        chosen = {"dist": "lognormal", "mean": format_duration(mean_ns), "sigma": round(best.sigma, 3)}
    return Fit(candidates, chosen, fits, len(inner))


def empirical(quantiles: Mapping[float, float], scale: float) -> dict[str, Any]:
    """A histogram through the quantiles × scale: bin i spans Q(p_i)..Q(p_i+1) with weight
    p_i+1 − p_i (equal quantiles merged into one edge)."""
    edges: list[int] = []
    weights: list[float] = []
    last_p = None
    for p in sorted(quantiles):
        e = _ns(quantiles[p] * scale)
        if edges and e <= edges[-1]:
            continue  # the same edge again: its mass joins the next bin
        if edges:
            assert last_p is not None
            weights.append(round(p - last_p, 6))
        edges.append(e)
        last_p = p
    if len(edges) < 2:  # all quantiles equal: one narrow bin around the value
        e = edges[0] if edges else 1
        edges, weights = [max(0, e - max(1, e // 100)), e + max(1, e // 100)], [1.0]
    return {"dist": "empirical", "edges": [format_duration(e) for e in edges], "weights": weights}


def _ns(seconds: float) -> int:
    """Seconds as ns rounded to 3 significant digits (what the measurement resolves)."""
    ns = seconds * 1e9
    if ns <= 0:
        return 0
    digits = 3 - int(math.floor(math.log10(ns))) - 1
    return int(round(ns, digits))


# --- the scenario's workload section --------------------------------------------------------


def _inline(table: Mapping[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    return "{ " + ", ".join(f"{k} = {value(v)}" for k, v in table.items()) + " }"


def workload_toml(
    name: str,
    clients: int,
    shape: Shape,
    fit: Fit,
    header: Sequence[str],
    client_threads: int | None = None,
    cross: Crossing | None = None,
    event_loop: Rearm | None = None,
) -> str:
    """The [workloads.NAME] section (closed_loop with its [workloads.NAME.shape]), with comments
    saying what was measured and how well each family fitted; the generator's threads and what
    an exchange across CPUs costs, when given."""
    lines = [f"# {h}" for h in header]
    lines.append(
        f"# {shape.requests} requests, {shape.qps:.4g}/s, mean latency {shape.latency_mean_s * 1e3:.4g} ms; "
        f"load generator CPU {shape.generator_cpu_per_request_s * 1e3:.4g} ms per request (it shares the node)"
    )
    lines.append(
        f"# service: CPU per request per thread {shape.cpu_per_request_s * 1e3:.4g} ms (cgroup CPU / requests / fanout); "
        f"family fitted to {fit.npoints} latency quantiles (quantile error over p{BODY[0]:g}-p{BODY[1]:g} / mean, KS distance):"
    )
    for c in fit.candidates:
        sigma = f" sigma {c.sigma:.3g}" if c.family == "lognormal" else ""
        lines.append(f"#   {c.family}{sigma}: quantile error {c.quantile_error:.1%}, KS {c.ks:.3f}")
    if not fit.fits:
        lines.append(f"#   none within {FIT_TOLERANCE:.0%}: empirical histogram of the quantiles, scaled to the CPU mean")
    wait_ns = _ns(shape.wait_s)
    lines += [
        f"[workloads.{name}]",
        'kind = "closed_loop"',
        f"clients = {clients}  # as driven",
        f"fanout = {shape.fanout}  # threads working at once on a request: {shape.parallelism:.3g} (CPU-weighted inverse Simpson index)",
        f"service = {_inline(fit.chosen)}",
    ]
    if client_threads is not None:
        lines.append(f"client_threads = {client_threads}  # the load generator's threads, serving its clients in turn")
    if event_loop:
        lines.append(
            f'event_loop = {{ read_share = 0.5, rearm = "{event_loop}" }}  # its threads are event loops, timing a request from write to reply read'
        )
    if cross is not None:
        lines.append(
            f"# per request apart / on one CPU ({cross.passes[0]} / {cross.passes[1]} passes, medians): server "
            f"{cross.free_server_s * 1e6:.3g} / {cross.one_cpu_server_s * 1e6:.3g} µs per thread, generator "
            f"{cross.free_client_s * 1e6:.3g} / {cross.one_cpu_client_s * 1e6:.3g} µs"
        )
        srv, cli = format_duration(_ns(cross.server_s)), format_duration(_ns(cross.client_s))
        lines.append(f'cross_cpu = {{ server = "{srv}", client = "{cli}" }}')
    lines += [
        f"[workloads.{name}.shape]",
        f"bursts = {shape.bursts}  # voluntary context switches per request per thread: {shape.switches_per_request:.3g} "
        "(bursts − 1 inside a request, and a share of one waiting for the next)",
    ]
    if shape.bursts <= 1 or wait_ns == 0:
        wait = {"dist": "constant", "value": "0s"}
        note = shape.wait_note or "no time left between bursts"
    else:
        # the counters give the mean only; the family is assumed (memoryless sleeps)
        wait = {"dist": "exponential", "mean": format_duration(wait_ns)}
        note = (
            f"(latency {shape.latency_mean_s * 1e3:.4g} − CPU {shape.cpu_per_request_s * 1e3:.4g} − run-queue wait "
            f"{shape.runqueue_wait_s * 1e3:.4g} ms) / {shape.bursts - 1}; mean measured, family assumed"
        )
    lines.append(f"wait = {_inline(wait)}  # {note}")
    return "\n".join(lines) + "\n"
