"""What a tuning study measures: metrics, objectives and SLOs, parsed from their text.

A metric is named as a user says it:

    batch_cpu            CPU-seconds the batch workloads got (after warm-up), summed over cases
    utilization          share of node capacity that ran any task, averaged over cases
    <service>.p50 .p90 .p99 .p999 .mean   latency (s) of a request-serving workload, worst case
    <service>.qps        its throughput, worst case

An SLO is `METRIC <= BOUND` or `METRIC >= BOUND`; BOUND is a number with an optional time unit
(`0.9s`, `120ms`), or relative to the service alone on the node: `1.1 * solo` (`solo` is the
same metric measured with every batch workload disabled, per case and seed).  Each trial runs
K seeds × every case; objectives are averaged over seeds, an SLO must hold on the worst.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum

from sim.errors import ScenarioError

LATENCIES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9, "mean": None}
NODE_METRICS = ("batch_cpu", "utilization")


class Sense(Enum):
    """Which way is better: the study's direction for an objective."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


@dataclass(frozen=True)
class Metric:
    """`batch_cpu`, `utilization`, or (`service`, `stat`) for a request-serving workload."""

    text: str
    service: str | None = None
    stat: str | None = None

    @property
    def sense(self) -> Sense:
        if self.service is None or self.stat == "qps":
            return Sense.MAXIMIZE
        return Sense.MINIMIZE

    @property
    def is_latency(self) -> bool:
        return self.stat in LATENCIES

    def worst(self, values: list[float]) -> float:
        """The worst of several measurements (seeds, cases): the largest latency, the least
        throughput."""
        finite = [v for v in values if not math.isnan(v)]
        if len(finite) < len(values):
            return math.nan  # a service that completed nothing: no percentile
        return max(finite) if self.sense is Sense.MINIMIZE else min(finite)

    def unit(self) -> str:
        if self.text == "batch_cpu":
            return "CPU·s"
        if self.text == "utilization":
            return "share"
        return "s" if self.is_latency else "req/s"


def parse_metric(text: str, services: list[str], where: str) -> Metric:
    t = text.strip()
    if t in NODE_METRICS:
        return Metric(t)
    service, dot, stat = t.rpartition(".")
    known = ", ".join([*NODE_METRICS, *(f"{s}.p99" for s in services)]) or "none"
    if not dot:
        raise ScenarioError(f"{where}: unknown metric {t!r} (known: {known}; a service's p50, p90, p99, p999, mean, qps)")
    if service not in services:
        who = ", ".join(services) or "none"
        raise ScenarioError(f"{where}: {service!r} is not a request-serving workload of the scenario (those are: {who})")
    if stat not in LATENCIES and stat != "qps":
        raise ScenarioError(f"{where}: unknown statistic {stat!r} of {service} (known: p50, p90, p99, p999, mean, qps)")
    return Metric(t, service, stat)


_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+"
_SLO = re.compile(r"^\s*(?P<metric>\S+)\s*(?P<op><=|>=)\s*(?P<bound>.+?)\s*$")
_ABSOLUTE = re.compile(rf"^(?P<x>{_NUMBER})\s*(?P<unit>s|ms|us|µs)?$")
_RELATIVE = re.compile(rf"^(?:(?P<k>{_NUMBER})\s*\*\s*)?solo(?:\s*\*\s*(?P<k2>{_NUMBER}))?$")


@dataclass(frozen=True)
class Slo:
    """`metric op bound`, the bound absolute or `factor` × the solo value."""

    text: str
    metric: Metric
    at_most: bool  # <= (else >=)
    bound: float | None = None  # absolute, in the metric's unit
    factor: float | None = None  # relative to solo

    def limit(self, solo: float) -> float:
        if self.factor is not None:
            return self.factor * solo
        assert self.bound is not None, "an SLO has a bound or a factor"  # parse_slo sets one
        return self.bound

    def violation(self, value: float, solo: float = math.nan) -> float:
        """How far one measurement is past the SLO (≤ 0: it holds), in the metric's unit; a
        measurement that does not exist (NaN: nothing completed) is an infinite violation."""
        limit = self.limit(solo)
        if math.isnan(value) or math.isnan(limit):
            return math.inf
        return value - limit if self.at_most else limit - value


def parse_slo(text: str, services: list[str], where: str) -> Slo:
    m = _SLO.match(text)
    if not m:
        raise ScenarioError(
            f'{where}: an SLO reads "METRIC <= BOUND" or "METRIC >= BOUND", e.g. "online.p99 <= 0.9s" or "online.p99 <= 1.1 * solo" (got {text!r})'
        )
    metric = parse_metric(m["metric"], services, where)
    at_most = m["op"] == "<="
    bound = m["bound"]
    if (rel := _RELATIVE.match(bound)) is not None:
        if metric.service is None:
            raise ScenarioError(f"{where}: {metric.text} has no solo value (solo is a service alone on the node); give a number")
        factor = float(rel["k"] or rel["k2"] or 1.0)
        if factor <= 0:
            raise ScenarioError(f"{where}: the factor of solo must be > 0 (got {factor:g})")
        return Slo(text.strip(), metric, at_most, factor=factor)
    if (ab := _ABSOLUTE.match(bound)) is None:
        raise ScenarioError(f"{where}: bound {bound!r} is neither a number (0.9s, 120ms, 500) nor relative to solo (1.1 * solo)")
    unit = ab["unit"] or ""
    if unit and not metric.is_latency:
        raise ScenarioError(f"{where}: {metric.text} is not a time; give its bound without a unit (got {bound!r})")
    return Slo(text.strip(), metric, at_most, bound=float(ab["x"]) * _UNITS[unit])
