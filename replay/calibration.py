"""A service's model fitted to its alone run on the host: the whole distribution, the load
generator's own CPU, and how well the fit holds.

What the host reports of a service running alone (`AloneRun`): its QPS — with closed-loop
clients that fixes the mean time round the loop (Little's law: clients = QPS × time round
the loop) —, the latency percentiles its load generator prints (wrk: 50/75/90/99,
clickhouse-benchmark: 0..99.99), the CPU share of the service's cgroup (which holds the
generator too: replay runs it there, replay/workloads.py), and the generator's own CPU rate
(its process's utime + stime over its run).

The model fitted (`Fit`), per request of a closed loop:

    client_cpu   the generator's CPU, constant = its measured CPU rate / QPS (wrk parses and
                 writes each request; clickhouse-benchmark reads each block): it runs on the
                 client's task in the cgroup the generator runs in, before the request is sent
    rounds       how many times per request each of the server's threads waits (its
                 voluntary context switches over the measured window / requests / the
                 request's threads, rounded, at least 1), traced with every short-lived thread;
                 where not traced, how many times the generator waits for the server (its own
                 switches / requests): client_cpu and the service then alternate in that many
                 equal parts (the core's `rounds`), as ClickHouse's query thread blocks about
                 once a block it streams while clickhouse-benchmark parses the last
                 (docs/replay.md, "The client's rounds", "The server's rounds")
    delay        a wait inside each request's latency that is neither CPU nor queueing, a
                 lognormal (mean and sigma fitted: wake-ups and round trips are skewed),
                 fitted only when the host's cgroup left its CPUs idle for part of the alone
                 run (loopback round trips, wake-ups: the gaps a batch job fills); with
                 several clients the CPUs idle only while most of them wait at once, so the
                 delay is a large part of the loop and shapes the latency too

Latency then runs from when the client is ready to when its response is served, as wrk and
clickhouse-benchmark time the whole exchange (the core's closed loop with client_cpu / delay).
    service      one of the core's families — constant, exponential, lognormal — with its
                 parameters fitted by simulating the alone run (same seed each time, so the
                 objective is deterministic) and minimizing the weighted squared log-error on
                 QPS and the percentiles the generator reported of P50, P90, P95, P99 (and
                 the cgroup's CPU share when a delay is fitted)

The service's CPU is not fitted when the host measured it: a request's CPU on each of its
threads is what the service's cgroup consumed over the measured window (cpuacct.usage) less
the load generator's own CPU (it runs in that cgroup), over the completed requests and the
request's threads (`service_cpu`). That is free of the other tenants' CPU, which a fit to the
alone QPS absorbed into the service time on a busy host (docs/replay.md, "Calibration on a busy
host"); the families then fit only their shape (a lognormal's sigma, an empirical histogram's
form at that mean) and the delay. What the model then misses of the alone QPS is contention the
model does not explain: it is kept in the residuals and said, never refitted away. Without a
measured cgroup CPU (an open question on v2 without cpuacct) the mean is fitted as before.

The simplest family whose fit is not materially worse wins; when no parametric family gets
every fitted metric within POOR_FIT, an empirical histogram shaped like the host's latency
distribution (edges at its reported percentiles, scaled) is fitted the same way, and used if
it is better. The residual of every metric is kept; a fit with any residual beyond POOR_FIT
is "poor", and replay says so (and comparison.json's calibration.quality).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np
from pydantic import TypeAdapter

from sim.errors import HostError
from sim.reported import REDIS_BATCH, Report
from sim.scenario import ClosedLoop, OpenLoop, Scenario, Variant
from sim.scenario.distributions import Distribution, mean_s
from sim.scenario.workloads import MAX_BURSTS as MAX_ROUNDS
from sim.scenario.workloads import EventLoop, Rearm

# a fitted metric further off than this (|sim / host - 1|) makes the fit poor
POOR_FIT = 0.10
# objective weights: QPS fixes the mean, so it counts most; then the CPU share (the gaps)
WEIGHTS = {"QPS": 4.0, "P50": 1.0, "P90": 1.0, "P95": 1.0, "P99": 1.0, "CPU share": 2.0}
# an alone run beside other work using more than this share of the node measured them too
DISTURBED = 0.10
# a cgroup busier than this alone leaves no gaps worth a delay
BUSY_WITHOUT_GAPS = 0.98
# simulated alone runs used for fitting: long enough for this many requests (capped by the
# scenario's own duration), so that P99 is steady and a fit costs seconds
FIT_REQUESTS = 20_000
# evaluations per family
MAX_EVALS = 60
# a family with more parameters must lower the objective by this factor to win
SIMPLER_WINS = 0.8
# the latency percentiles fitted, those of them the generator reported (redis-benchmark's CSV
# gives P50, P95 and P99, no P90: fitting a P90 interpolated between P50 and P95 asked the
# model for a median-heavy shape the host never measured)
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
_DIST: TypeAdapter[Any] = TypeAdapter(Distribution)


@dataclass(frozen=True)
class AloneRun:
    """What the host measured of one service running alone."""

    qps: float
    percentiles: dict[float, float]  # percentile -> seconds, as the generator reported them
    busy: float | None = None  # the service cgroup's CPU share of the node (None: not known)
    # CPU·s/s the load generator used in the service's cgroup; None: no separate generator
    # (colosim-load's clients are the workload itself); NaN: one ran, its CPU was not measured
    generator_cpu: float | None = None
    # its voluntary context switches per second over its run (None / NaN: not measured)
    generator_switches: float | None = None
    # the server's, all its threads, per second over the measured window (None / NaN: not traced)
    server_switches: float | None = None
    # the share of the node busy outside the run's cgroups meanwhile (other tenants)
    others: float | None = None
    # their CPU-weighted mean burst in seconds (RunResult.others_burst_s; None: not traced)
    others_burst: float | None = None
    # the service cgroup's queue on each CPU as the trace counted it (compare.queue_metrics:
    # its keys without the cgroup's name; None: not traced)
    queue: dict[str, float] | None = None
    # a real server's generator reported it (not colosim-load, which runs the scenario's own
    # think times: no delay is fitted to its gaps)
    reported: bool = False

    def to_dict(self) -> dict[str, Any]:
        """As JSON keeps it (percentiles keyed by their text; NaN written as null): what the
        calibration needs to be redone later from the same host measurements."""
        d = asdict(self)
        d["percentiles"] = {str(p): v for p, v in self.percentiles.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AloneRun:
        """to_dict's inverse; a null count (NaN when written) is NaN: measured by a real
        server's generator, which always has one, but not measured."""

        def num(key: str, null: float | None) -> float | None:
            v = d.get(key)
            return null if v is None else float(v)

        return cls(
            qps=float(d["qps"]) if d.get("qps") is not None else math.nan,
            percentiles={float(p): float(v) for p, v in d["percentiles"].items() if v is not None},
            busy=num("busy", None),
            generator_cpu=num("generator_cpu", math.nan),
            generator_switches=num("generator_switches", math.nan),
            server_switches=num("server_switches", math.nan),
            others=num("others", None),
            others_burst=num("others_burst", None),
            queue={str(k): float(v) for k, v in d["queue"].items()} if d.get("queue") else None,
            reported=bool(d.get("reported", False)),
        )


class Client(NamedTuple):
    """A closed loop's load generator as fitted: its CPU per request, in `rounds` parts."""

    cpu_s: float
    rounds: int = 1


def service_cpu(alone: AloneRun, client_cpu_s: float, ncpus: int, threads: int) -> float | None:
    """A request's CPU on each of its `threads` from what the service's cgroup consumed:
    (the cgroup's CPU·s/s, busy × ncpus, over QPS) less the generator's CPU per request, over
    the threads. None when the cgroup's CPU was not measured or leaves nothing for the server."""
    if alone.busy is None or not (math.isfinite(alone.busy) and alone.busy > 0 and alone.qps > 0 and math.isfinite(alone.qps)):
        return None
    per_request = alone.busy * ncpus / alone.qps - client_cpu_s
    return per_request / max(1, threads) if per_request > 0 else None


class Rounds(NamedTuple):
    """A request's client<->server rounds and what they were counted from."""

    k: int
    source: str  # "server" (its traced switches), "generator" (its own) or "" (one round)


def client_rounds(alone: AloneRun, client_cpu_s: float, threads: int = 1) -> Rounds:
    """The rounds of a request: how often each server thread sleeps per request — in the
    model it sleeps once after each of its k parts, the last wait being for the next
    request — from the server's traced voluntary switches per request over its `threads`;
    untraced, the generator's voluntary switches per request (each one a wait for the
    server's next block), which undercounts a server whose threads also wait for each other
    (ClickHouse: ~45 against ~150, docs/replay.md "The server's rounds"). At least 1; 1
    without a generator CPU to split."""

    def per_request(sw: float | None, over: int) -> int | None:
        if sw is None or not (math.isfinite(sw) and sw >= 0 and alone.qps > 0):
            return None
        return int(min(MAX_ROUNDS, max(1, round(sw / alone.qps / over))))

    if not client_cpu_s > 0:
        return Rounds(1, "")
    server = per_request(alone.server_switches, max(1, threads))
    if server is not None:
        return Rounds(server, "server")
    generator = per_request(alone.generator_switches, 1)
    return Rounds(generator, "generator") if generator is not None else Rounds(1, "")


@dataclass
class Fit:
    """A service model fitted to an alone run."""

    workload: str
    family: str
    service: dict[str, Any]  # the [workloads.x.service] table
    client_cpu_s: float  # the generator's CPU per request
    delay_s: float  # mean delay inside each request's latency, 0: none
    measured: dict[str, float]
    fitted: dict[str, float]  # the simulated alone run with this model
    tried: dict[str, float] = field(default_factory=dict)  # family -> objective
    notes: list[str] = field(default_factory=list)
    others: float | None = None  # AloneRun.others
    delay_sigma: float = 0.0  # the delay's lognormal sigma (0: none fitted)
    rounds: int = 1  # the client<->server rounds per request (client_rounds)
    rounds_from: str = ""  # what they were counted from: "server", "generator" ("": one round)
    # the service's CPU per request per thread measured from its cgroup (service_cpu): the
    # family's mean; None: not measured, the mean was fitted
    cpu_s: float | None = None
    background_cpus: float = 0.0  # the other tenants' CPUs run in the simulated alone run
    # the load generator's threads as replay runs it (replay.workloads.generator_threads), set
    # where the scenario gives none; None: the scenario's own (or a task per client)
    client_threads: int | None = None
    # the share of the fitted alone run's messages that crossed CPUs (NaN: no cross_cpu)
    crossed: float = math.nan
    # ... and how many crossed per request, per direction (ServiceResult.crossings_per_request)
    crossings: float = math.nan
    # the generator's threads are event loops timing write to reply read, re-arming a write
    # as this says ("readd", "modify": replay.workloads generator_event_loop), set where the
    # scenario gives no event_loop; None: not an event loop
    event_loop: Rearm | None = None
    # how the host's generator prints latencies, as the fit's simulated runs reported them
    # (sim/reported.py; replay.workloads generator_report); None: every request's exactly
    report: Report | None = None

    @property
    def disturbed(self) -> bool:
        return self.others is not None and self.others > DISTURBED

    @property
    def residuals(self) -> dict[str, float]:
        """sim / host - 1 per fitted metric."""
        return {m: self.fitted[m] / v - 1 for m, v in self.measured.items() if v > 0 and math.isfinite(self.fitted.get(m, math.nan))}

    @property
    def poor(self) -> list[str]:
        """The metrics the fit misses by more than POOR_FIT (a metric it could not reproduce
        at all counts as missed)."""
        r = self.residuals
        return [m for m in self.measured if m not in r or abs(r[m]) > POOR_FIT]

    @property
    def quality(self) -> str:
        # a disturbed window is no longer poor by itself once the service's CPU is measured
        # (not fitted to the disturbed QPS) and the other tenants run in the model
        return "poor" if self.poor or (self.disturbed and self.cpu_s is None) else "good"

    @property
    def contention(self) -> float | None:
        """What the model misses of the alone QPS with the measured CPU (sim / host - 1):
        the host's contention the model does not explain (None: the mean was fitted to it)."""
        if self.cpu_s is None:
            return None
        return self.residuals.get("QPS")

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "service": self.service,
            "client_cpu_s": self.client_cpu_s,
            "delay_s": self.delay_s,
            "delay_sigma": self.delay_sigma,
            "rounds": self.rounds,
            "rounds_from": self.rounds_from,
            "client_threads": self.client_threads,
            "event_loop": self.event_loop,
            "report": self.report,
            "crossed_share": self.crossed if math.isfinite(self.crossed) else None,
            "crossings_per_request": self.crossings if math.isfinite(self.crossings) else None,
            "service_cpu_s": self.cpu_s,
            "service_cpu_from": "cgroup" if self.cpu_s is not None else "fitted",
            "background_cpus": self.background_cpus,
            "alone_qps_unexplained": self.contention,
            "measured": self.measured,
            "fitted": self.fitted,
            "residuals": self.residuals,
            "quality": self.quality,
            "poor_metrics": self.poor,
            "others_cpu_share": self.others,
            "disturbed": self.disturbed,
            "objective_by_family": self.tried,
            "notes": self.notes,
        }

    def describe(self) -> str:
        svc = ", ".join(f"{k} {_show(v)}" for k, v in self.service.items() if k != "dist" and k not in ("edges", "weights"))
        lines = [f"service model of {self.workload}: {self.family}{f' ({svc})' if svc else ''} fitted to the host's alone run"]
        if self.client_cpu_s > 0:
            lines.append(f"  load generator's CPU: {self.client_cpu_s * 1e6:.1f} µs per request in the service's cgroup")
        if self.client_threads is not None:
            lines.append(f"  load generator's threads: {self.client_threads}, serving its clients in turn (as replay runs it)")
        if self.event_loop:
            lines.append(
                "  load generator: event loops, timing a request from its write to its reply's read (as it measures);"
                f" a read re-arms its write for a later pass ({self.event_loop})"
            )
        if self.report == "wrk":
            lines.append("  latency percentiles as wrk prints them: corrected for coordinated omission, the host's and the model's alike")
        elif self.report == "redis-benchmark":
            lines.append(
                f"  latency percentiles as replay reads redis-benchmark's: each the mean over batches of {REDIS_BATCH:,} requests, host and model alike"
            )
        if self.rounds > 1:
            whose = (
                "each server thread's voluntary switches per request, traced"
                if self.rounds_from == "server"
                else "the generator's voluntary switches per request: the server's were not traced"
            )
            lines.append(f"  in {self.rounds} rounds with the server ({whose})")
        if self.cpu_s is not None:
            lines.append(f"  service CPU: {self.cpu_s * 1e3:.3g} ms per request per thread, measured from its cgroup's CPU (not fitted)")
        if self.background_cpus > 0:
            lines.append(f"  other tenants: {self.background_cpus:.2f} CPUs busy outside the run, run beside it in the model")
        c = self.contention
        if c is not None and abs(c) > POOR_FIT:
            lines.append(f"  the alone QPS with the measured CPU is {c * 100:+.1f}% off the host's: contention the model does not explain")
        if self.delay_s > 0:
            lines.append(
                f"  gaps: a delay of {self.delay_s * 1e6:.1f} µs (lognormal, sigma {self.delay_sigma:.2f}) in each request, "
                "neither CPU nor queueing, "
                "fitted to the cgroup's CPU share"
            )
        res = self.residuals
        lines.append(
            "  residuals (sim / host - 1): " + ", ".join(f"{m} {res[m] * 100:+.1f}%" if m in res else f"{m} -" for m in self.measured)
        )
        lines.extend(f"  {n}" for n in self.notes)
        if self.disturbed and self.cpu_s is None:
            lines.append(
                f"  DISTURBED: {self.others:.0%} of the node was busy outside the run's cgroups during the alone run "
                "(the host's other work): the fit absorbed that interference; replay again on a quieter host"
            )
        if self.poor:
            lines.append(
                f"  POOR FIT: {', '.join(self.poor)} off by more than {POOR_FIT:.0%}: the prediction inherits this error "
                "(the service's shape is beyond the core's families)"
            )
        return "\n".join(lines)


def calibration_doc(fits: dict[str, Fit]) -> dict[str, Any]:
    """comparison.json's "calibration": each service's fit, and the overall quality ("poor"
    when any service's fit is, "none" when nothing was fitted)."""
    quality = "poor" if any(f.quality == "poor" for f in fits.values()) else ("good" if fits else "none")
    return {"quality": quality, "poor_fit_threshold": POOR_FIT, "services": {name: f.to_dict() for name, f in fits.items()}}


def _show(v: Any) -> str:
    if isinstance(v, str) and v.endswith("ns") and v[:-2].isdigit():
        ns = int(v[:-2])
        return f"{ns / 1e6:.3g} ms" if ns >= 1_000_000 else f"{ns / 1e3:.3g} µs"
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def measured_metrics(alone: AloneRun, fit_gaps: bool) -> dict[str, float]:
    out = {"QPS": alone.qps}
    for p in PERCENTILES:
        if p in alone.percentiles:
            out[f"P{p:g}"] = alone.percentiles[p]
    if fit_gaps and alone.busy is not None:
        out["CPU share"] = alone.busy
    return out


# the objective of a fitted delay beyond its bound (fit_service: the time round the loop)
DELAY_OUT_OF_BOUNDS = 1e3

# not metrics fitted: the share of the messages of a simulated alone run that crossed CPUs,
# and how many crossed per request (per direction)
CROSSED = "crossed share"
CROSSINGS = "crossings per request"

# what one simulated alone run gives, for a service model: metric -> value
Simulate = Callable[[dict[str, Any], Client, tuple[float, float]], dict[str, float]]


def fit_service(
    name: str,
    alone: AloneRun,
    simulate: Simulate,
    ncpus: int,
    clients: int | None,
    gaps: bool = True,
    threads: int = 1,
    background_cpus: float = 0.0,
    cross: tuple[float, float] = (0.0, 0.0),
    crossings: float | None = None,
) -> Fit:
    """Fit workload `name`'s model to `alone`; `simulate(service_table, Client, (delay_s, delay_sigma))`
    runs the alone run in the simulator and returns its metrics (QPS, P50, P90, P95, P99, CPU share).
    `clients`: a closed loop's (None: an open loop, whose QPS is its arrival rate and whose
    clients are not on the node); `gaps`: whether a delay may be fitted to the cgroup's idle
    share (a real server's; colosim-load runs the scenario's own exchanges); `threads`: a
    request's threads (its fanout), over which the cgroup's measured CPU is split;
    `background_cpus`: the other tenants the simulated alone run carries (recorded);
    `cross`: the workload's `cross_cpu` (server, client) in seconds, which each request of the
    alone run paid `crossings` times (its messages whose client and server ran on different
    CPUs, per direction; the model's count from a first fit: fit_alone_runs; None: every
    message of its rounds crossed): taken out of the measured CPU per request, so that the
    fitted CPU is what an exchange on one CPU costs."""
    closed = clients is not None
    g = alone.generator_cpu
    generator_cpu = g / alone.qps if closed and g is not None and g > 0 and alone.qps > 0 else 0.0
    client_cpu = generator_cpu
    notes: list[str] = []
    rounds = client_rounds(alone, client_cpu, threads)
    # each round is a request to every server thread and a reply to the generator; without a
    # generator's CPU the model's clients run no task, so no message crosses
    per = float(rounds.k) if crossings is None else crossings
    cross = (cross[0] * per, cross[1] * per) if client_cpu > 0 else (0.0, 0.0)
    if client_cpu > 0 and any(cross):
        if not client_cpu > cross[1]:
            raise HostError(
                f"workloads.{name}.cross_cpu.client: {cross[1] * 1e6:.2f} µs is not below the load generator's "
                f"measured CPU per request alone ({client_cpu * 1e6:.2f} µs)"
            )
        client_cpu -= cross[1]
        notes.append(
            f"cross_cpu: {cross[0] * 1e6:.2f} µs (server) + {cross[1] * 1e6:.2f} µs (client) a request taken out of "
            f"the measured CPU, which the alone run's exchanges across CPUs paid ({per:.2f} a request each way, as the model "
            f"runs it, of {rounds.k} round{'s' if rounds.k != 1 else ''})"
        )
    client = Client(client_cpu, rounds.k)
    # the gaps are the node's idle time, which other work on a disturbed host fills: a delay is
    # fitted only to an undisturbed alone run
    disturbed = alone.others is not None and alone.others > DISTURBED
    fit_gaps = closed and gaps and not disturbed and alone.busy is not None and alone.busy < BUSY_WITHOUT_GAPS
    measured = measured_metrics(alone, fit_gaps)
    if not closed:
        del measured["QPS"]
    if not (alone.qps > 0 and math.isfinite(alone.qps)) or "P50" not in measured:
        raise HostError(f"workloads.{name}: the alone run measured no QPS or P50 to fit the service to")
    p50 = measured["P50"]
    # first guesses: the mean from the CPU the cgroup used per request (less the generator's),
    # or else from the median; the spread from P90 / P50 as a lognormal's would be
    if alone.busy is not None and alone.busy > 0:
        mean0 = max(alone.busy * ncpus / alone.qps - client_cpu, p50 / 20)
    else:
        mean0 = p50
    # (P90 at z = 1.2816, else P95 at z = 1.6449)
    spread = math.log(measured["P90"] / p50) / 1.2816 if "P90" in measured else math.log(measured.get("P95", 2 * p50) / p50) / 1.6449
    sigma0 = min(2.0, max(0.1, spread))
    # two first delays, each fitted, the better kept: the idle share of the time round the
    # loop (clients / QPS, Little's law), and that loop less the CPU a request takes and as
    # much again for queueing (a cgroup that idles with several clients must have most of them
    # waiting at once; but such a delay shapes the latency, and may fit it worse)
    loop = (clients or 1) / alone.qps
    per_request = alone.busy * ncpus / alone.qps if alone.busy is not None else p50
    delay0 = [max(0.05, 1 - (alone.busy or 1)) * loop, max(0.05 * loop, loop - 2 * per_request)] if fit_gaps else [0.0]

    def objective_of(metrics: dict[str, float]) -> float:
        total = 0.0
        for m, v in measured.items():
            got = metrics.get(m, math.nan)
            if not (math.isfinite(got) and got > 0):
                return 1e6
            total += WEIGHTS[m if m in WEIGHTS else "P50"] * math.log(got / v) ** 2
        return total

    cpu = service_cpu(alone, generator_cpu, ncpus, threads)
    if cpu is not None and cross[0] > 0:
        if not cpu > cross[0]:
            raise HostError(
                f"workloads.{name}.cross_cpu.server: {cross[0] * 1e6:.2f} µs is not below the server's "
                f"measured CPU per request per thread alone ({cpu * 1e6:.2f} µs)"
            )
        cpu -= cross[0]
    families: list[tuple[str, Callable[[np.ndarray], dict[str, Any]], list[float]]]
    if cpu is not None:
        # the mean measured: each family fits its shape only (constant and exponential none)
        families = [
            ("constant", lambda x: {"dist": "constant", "value": _ns(cpu)}, []),
            ("exponential", lambda x: {"dist": "exponential", "mean": _ns(cpu)}, []),
            ("lognormal", lambda x: {"dist": "lognormal", "mean": _ns(cpu), "sigma": min(3.0, math.exp(x[0]))}, [math.log(sigma0)]),
        ]
    else:
        families = [
            ("constant", lambda x: {"dist": "constant", "value": _ns(math.exp(x[0]))}, [math.log(mean0)]),
            ("exponential", lambda x: {"dist": "exponential", "mean": _ns(math.exp(x[0]))}, [math.log(mean0)]),
            (
                "lognormal",
                lambda x: {"dist": "lognormal", "mean": _ns(math.exp(x[0])), "sigma": min(3.0, math.exp(x[1]))},
                [math.log(mean0), math.log(sigma0)],
            ),
        ]
    results: dict[str, tuple[float, dict[str, Any], tuple[float, float], dict[str, float]]] = {}
    # the delay is inside each request's latency, so its mean cannot exceed the mean latency,
    # the time round the loop (with cross_cpu only crossing requests wait it, and a delay the
    # simplex stretched past this made a bimodal latency the host did not have)
    for family, table, x0 in families:
        results[family] = _fit_family(table, x0, fit_gaps, delay0, client, simulate, objective_of, delay_cap=loop)
    # the simplest family not materially worse than a richer one
    order = [f for f, _, _ in families]
    best = order[0]
    for f in order[1:]:
        if results[f][0] < SIMPLER_WINS * results[best][0]:
            best = f
    if any(
        abs(results[best][3].get(m, math.nan) / v - 1) > POOR_FIT or not math.isfinite(results[best][3].get(m, math.nan))
        for m, v in measured.items()
    ):
        emp = _fit_empirical(alone, fit_gaps, delay0, client, simulate, objective_of, cpu, delay_cap=loop)
        if emp is not None:
            results["empirical"] = emp
            if emp[0] < results[best][0]:
                notes.append(
                    f"no parametric family fits within {POOR_FIT:.0%} ({best} was closest): "
                    "fell back to an empirical histogram shaped like the host's latency percentiles"
                )
                best = "empirical"
    objective, service, (delay, delay_sigma), fitted = results[best]
    if disturbed and gaps and closed:
        notes.append("no delay fitted to the gaps: the host's other work filled the node's idle time")
    if closed and g is not None and not g > 0:
        notes.append("the load generator's CPU was not measured: the model's clients cost nothing")
    return Fit(
        workload=name,
        family=best,
        service=service,
        client_cpu_s=client_cpu,
        delay_s=delay,
        measured=measured,
        fitted={m: fitted.get(m, math.nan) for m in measured},
        crossed=fitted.get(CROSSED, math.nan),
        crossings=fitted.get(CROSSINGS, math.nan),
        tried={f: r[0] for f, r in results.items()},
        notes=notes,
        others=alone.others,
        delay_sigma=delay_sigma,
        rounds=client.rounds,
        rounds_from=rounds.source,
        cpu_s=cpu,
        background_cpus=background_cpus,
    )


def _ns(seconds: float) -> str:
    return f"{max(1, round(seconds * 1e9))}ns"


def _fit_family(table, x0, fit_gaps, delay0: list[float], client: Client, simulate, objective_of, delay_cap: float = math.inf):
    """Nelder-Mead over the family's log-parameters (and the log delay when gaps are fitted,
    from each first delay in turn: the best fit)."""
    fits = [_fit_from(table, x0, fit_gaps, d, client, simulate, objective_of, delay_cap) for d in delay0]
    return min(fits, key=lambda f: f[0])


def _fit_from(table, x0, fit_gaps, delay0: float, client: Client, simulate, objective_of, delay_cap: float = math.inf):
    cache: dict[tuple[float, ...], tuple[float, dict[str, float]]] = {}

    def split(x: np.ndarray) -> tuple[dict[str, Any], tuple[float, float]]:
        # the delay: a lognormal (its mean and sigma), as wake-ups and round trips are skewed
        if fit_gaps:
            return table(x[:-2]), (math.exp(x[-2]), min(3.0, math.exp(x[-1])))
        return table(x), (0.0, 0.0)

    def f(x: np.ndarray) -> float:
        key = tuple(np.round(x, 6))
        if key not in cache:
            svc, delay = split(x)
            if delay[0] > delay_cap:
                # a wait inside the latency longer than the mean latency: out of bounds, and the
                # further out the worse, so that the simplex turns back
                return DELAY_OUT_OF_BOUNDS * (1 + math.log(delay[0] / delay_cap))
            metrics = simulate(svc, client, delay)
            cache[key] = (objective_of(metrics), metrics)
        return cache[key][0]

    start = np.array(x0 + ([math.log(max(delay0, 1e-7)), 0.0] if fit_gaps else []), dtype=float)
    x = nelder_mead(f, start, step=0.35, max_evals=MAX_EVALS)
    svc, delay = split(x)
    obj, metrics = cache[tuple(np.round(x, 6))]
    return obj, svc, delay, metrics


def nelder_mead(f: Callable[[np.ndarray], float], start: np.ndarray, step: float, max_evals: int, tol: float = 1e-5) -> np.ndarray:
    """The minimum of f found by the Nelder-Mead simplex (reflect 1, expand 2, contract 1/2,
    shrink 1/2) from `start`, the first simplex a `step` along each axis; stops after
    `max_evals` evaluations or when the simplex's values agree within `tol`."""
    n = len(start)
    pts = [start.astype(float)] + [start + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] <= tol:
            break
        centroid = np.mean(pts[:-1], axis=0)
        reflected = centroid + (centroid - pts[-1])
        fr = f(reflected)
        evals += 1
        if fr < vals[0]:
            expanded = centroid + 2 * (centroid - pts[-1])
            fe = f(expanded)
            evals += 1
            pts[-1], vals[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (pts[-1] - centroid)
            fc = f(contracted)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = contracted, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                evals += n
    return pts[int(np.argmin(vals))]


def empirical_table(percentiles: dict[float, float], scale: float) -> dict[str, Any]:
    """A histogram with the shape of the reported latency distribution: a bin between each two
    reported percentiles weighted by the probability between them, the tails below the lowest
    and above the highest extended geometrically; every edge times `scale`."""
    ps = sorted(p for p, v in percentiles.items() if v > 0 and 0 < p < 100)
    vs = [percentiles[p] for p in ps]
    # strictly increasing edges (reports repeat values at coarse resolution)
    pts: list[tuple[float, float]] = []
    for p, v in zip(ps, vs, strict=True):
        if not pts or v > pts[-1][1]:
            pts.append((p, v))
    if len(pts) < 2:
        raise ValueError("needs two distinct latency percentiles")
    (p_lo, v_lo), (p_hi, v_hi) = pts[0], pts[-1]
    below = v_lo * v_lo / pts[1][1]
    above = v_hi * v_hi / pts[-2][1]
    edges = [below] + [v for _, v in pts] + [above]
    weights = [p_lo] + [b[0] - a[0] for a, b in zip(pts, pts[1:], strict=False)] + [100 - p_hi]
    return {"dist": "empirical", "edges": [_ns(e * scale) for e in edges], "weights": [w / 100 for w in weights]}


def _fit_empirical(alone, fit_gaps, delay0, client: Client, simulate, objective_of, cpu: float | None = None, delay_cap: float = math.inf):
    """The empirical histogram fitted by its scale, or (the mean measured: `cpu`) scaled to
    that mean, its form fixed by the host's percentiles."""
    pts = {p: v for p, v in alone.percentiles.items() if 0 < p < 100}
    try:
        unit = empirical_table(pts, 1.0)
    except ValueError:
        return None
    if cpu is not None:
        scale = cpu / mean_s(_DIST.validate_python(unit))
        return _fit_family(lambda x: empirical_table(pts, scale), [], fit_gaps, delay0, client, simulate, objective_of, delay_cap)
    return _fit_family(lambda x: empirical_table(pts, math.exp(x[0])), [0.0], fit_gaps, delay0, client, simulate, objective_of, delay_cap)


def apply_fit(scenario: Scenario, fit: Fit) -> Scenario:
    """The scenario with workload `fit.workload`'s service, client CPU and delay fitted."""
    out = scenario.model_copy(deep=True)
    w = out.workloads[fit.workload]
    if not isinstance(w, ClosedLoop | OpenLoop):
        raise ValueError(f"workloads.{fit.workload}: a {w.kind} workload is not calibrated")
    w.service = _DIST.validate_python(fit.service)
    if isinstance(w, ClosedLoop):
        if fit.client_cpu_s > 0:
            w.client_cpu = _DIST.validate_python({"dist": "constant", "value": _ns(fit.client_cpu_s)})
            if fit.client_threads is not None and w.client_threads is None:
                w.client_threads = fit.client_threads
            if fit.event_loop and w.event_loop is None:
                w.event_loop = EventLoop(rearm=fit.event_loop)
            if w.workers is None and (w.shape is None or w.shape.bursts == 1) and w.event_loop is None:
                w.rounds = fit.rounds
        if fit.delay_s > 0:
            w.delay = _DIST.validate_python({"dist": "lognormal", "mean": _ns(fit.delay_s), "sigma": fit.delay_sigma})
    return out


def simulator_of(scenario: Scenario, name: str, seed: int, substitute: frozenset, ncpus: int) -> Simulate:
    """`simulate` for fit_service: the alone run of `scenario` (its baseline, host-equivalent)
    in the simulator, shortened to about FIT_REQUESTS requests."""
    from sim.runner import run_variant

    cg = scenario.workloads[name].cgroup

    def simulate(service: dict[str, Any], client: Client, delay: tuple[float, float]) -> dict[str, float]:
        fit = Fit(name, service["dist"], service, client.cpu_s, delay[0], {}, {}, delay_sigma=delay[1], rounds=client.rounds)
        sc = apply_fit(scenario, fit)
        got = run_variant(Variant("calibration", True, sc), seed, substitute=substitute)
        svc = got.services[name]
        out = {
            "QPS": svc.qps,
            "CPU share": got.cgroups[cg].cpu_share if cg in got.cgroups else math.nan,
            CROSSED: svc.crossed_share,
            CROSSINGS: svc.crossings_per_request,
        }
        for p in PERCENTILES:
            out[f"P{p:g}"] = svc.percentile(p)
        return out

    return simulate


def shortened(scenario: Scenario, qps: float) -> Scenario:
    """The scenario cut to about FIT_REQUESTS requests at `qps` after its own warm-up (never
    longer than it is, never shorter than 0.5 s measured). The warm-up is the prediction's:
    the fit's alone run must be the one the prediction then runs. A shorter one (FIT_REQUESTS
    / 10 requests, as before) fitted the model's first second, and on 6.18.44 that is not its
    steady state: beside postgres + pgbench the background's duty thread ran its 3 ms every
    100 ms for ~0.9 s and then nothing (the reweight starvation, docs/replay.md "The other
    tenants' bursts"), so the fitted alone P99 (1.23 ms) was not the predicted one (1.00 ms)."""
    meta = scenario.scenario
    measured = round(max(0.5, FIT_REQUESTS / qps) * 1e9) if qps > 0 else meta.duration
    if meta.warmup + measured >= meta.duration:
        return scenario
    out = scenario.model_copy(deep=True)
    out.scenario.duration = meta.warmup + measured
    return out
