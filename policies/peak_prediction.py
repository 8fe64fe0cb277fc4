"""koordlet's peak prediction (pkg/koordlet/prediction; ../shared/reference/koordinator.md
§5): decaying usage histograms per pod, per priority class and for the system, trained once a
minute on the last usage sample, and the "prod reclaimable" koordlet reports in its
NodeMetric — how much of the prod pods' requests their predicted peaks leave unused, which
the slo-controller offers as the Mid tier (policies/batch_resource.mid_allocatable).

* Histograms (`defaultCPUHistogram` / `defaultMemoryHistogram`): CPU in cores, exponential
  buckets from 0.025 up to 1024 growing 5%, half-life 12 h; memory in bytes from 5 MiB up to
  2 TiB, half-life 24 h. A prediction is p60 / p90 / p95 / p98 / max of each; the peak of
  CPU is its p95, of memory its p98.
* Pod predictor: a prod (or priority-less) pod younger than the cold start (24 h) counts its
  requests as unpredicted peak; an older one reclaims request − peak × (1 + safety margin
  10%) when positive. Reclaimable = min(Σ reclaimable, allocatable − Σ peaks).
* Priority predictor: prod requests − (system + prod-class peaks) × (1 + margin), bounded
  by allocatable − those peaks.
* The prod reclaimable is the smaller of the two; the peak the larger.

CPU quantities are millicores, memory bytes; times are seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from policies.histogram import DecayingHistogram, Exponential
from policies.pods import Pod, PriorityClass

COLD_START_S = 24 * 3600.0  # prediction-cold-start-duration
SAFETY_MARGIN_PERCENT = 10  # prediction-safety-margin-percent
CPU_HALF_LIFE_S = 12 * 3600.0
MEMORY_HALF_LIFE_S = 24 * 3600.0
TRAINING_INTERVAL_S = 60.0
MODEL_EXPIRATION_S = 30 * 60.0
MIN_SAMPLE_WEIGHT = 0.1
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
BUCKET_GROWTH = 0.05  # DefaultHistogramBucketSizeGrowth
PERCENTILES = {"p60": 0.6, "p90": 0.9, "p95": 0.95, "p98": 0.98, "max": 1.0}
NODE = "node"
SYSTEM = "node/sys"  # getNodeItemUID(SystemItemID)
# KnownPriorityClasses, with "" for PriorityNone; only prod and none are reclaimable for prod
CLASSES = ("koord-prod", "koord-mid", "koord-batch", "koord-free", "")
RECLAIMABLE_FOR_PROD = ("koord-prod", "")

Amount = tuple[int, int]  # (CPU millicores, memory bytes)
Result = dict[str, Amount]  # percentile name → amount


def node_item(priority_class: str) -> str:
    return f"node/{priority_class}"


def cpu_histogram() -> DecayingHistogram:
    return DecayingHistogram(Exponential(1024, 0.025, 1 + BUCKET_GROWTH, EPSILON), half_life=CPU_HALF_LIFE_S)


def memory_histogram() -> DecayingHistogram:
    return DecayingHistogram(Exponential(1 << 41, 5 << 20, 1 + BUCKET_GROWTH, EPSILON), half_life=MEMORY_HALF_LIFE_S)


@dataclass
class Model:
    cpu: DecayingHistogram = field(default_factory=cpu_histogram)
    memory: DecayingHistogram = field(default_factory=memory_histogram)
    last_updated: float = 0.0


class Predictions(Protocol):
    def prediction(self, uid: str) -> Result:
        """The uid's prediction; KeyError when there is none."""
        ...


@dataclass
class PredictServer:
    """`peakPredictServer`: one model per uid, trained from the last samples."""

    models: dict[str, Model] = field(default_factory=dict)

    def update(self, uid: str, cpu_cores: float, memory_bytes: float, now: float) -> None:
        m = self.models.setdefault(uid, Model())
        m.last_updated = now
        m.cpu.add(cpu_cores, 1, now)
        m.memory.add(memory_bytes, 1, now)

    def train(self, now: float, pods: Iterable[tuple[str, str, float, float]], node_cpu: float, node_memory: float) -> None:
        """`training`: each pod (uid, priority class, cores, bytes), the node, every priority
        class's sum (0 for a class without pods) and the system (node − all pods, ≥ 0)."""
        sums: dict[str, tuple[float, float]] = {}
        all_cpu = all_memory = 0.0
        for uid, klass, cpu, memory in pods:
            self.update(uid, cpu, memory, now)
            c, m = sums.get(klass, (0.0, 0.0))
            sums[klass] = (c + cpu, m + memory)
            all_cpu += cpu
            all_memory += memory
        self.update(NODE, node_cpu, node_memory, now)
        for klass in CLASSES:
            self.update(node_item(klass), *sums.get(klass, (0.0, 0.0)), now)
        self.update(SYSTEM, max(node_cpu - all_cpu, 0.0), max(node_memory - all_memory, 0.0), now)

    def gc(self, now: float) -> None:
        """`gcModels`: forget models not updated for 30 min (pods gone)."""
        for uid in [u for u, m in self.models.items() if now - m.last_updated > MODEL_EXPIRATION_S]:
            del self.models[uid]

    def prediction(self, uid: str) -> Result:
        m = self.models[uid]
        return {k: (int(m.cpu.percentile(p) * 1000.0), int(m.memory.percentile(p))) for k, p in PERCENTILES.items()}


@dataclass(frozen=True)
class PodInfo:
    """A pod as the predictors see it: its age and whether it is going away (deletion
    timestamp set, or terminated)."""

    pod: Pod
    age_s: float
    uid: str = ""
    leaving: bool = False

    @property
    def key(self) -> str:
        return self.uid or self.pod.cgroup

    @property
    def requests(self) -> Amount:
        """`GetPodRequest(pod, cpu, memory)`: the pod's own cpu / memory requests."""
        r = self.pod.request_resources()
        return int(r.get("cpu", 0)), int(r.get("memory", 0))


def priority_class(p: Pod) -> str:
    return p.priority.label if isinstance(p.priority, PriorityClass) else ""


def _scale(a: Amount, margin_percent: int) -> Amount:
    """MultiplyMilliQuant / MultiplyQuant: int64(value × (100 + margin) / 100)."""
    ratio = (100 + margin_percent) / 100
    return int(a[0] * ratio), int(a[1] * ratio)


def _min(a: Amount, b: Amount) -> Amount:
    return min(a[0], b[0]), min(a[1], b[1])


def _fix(allocatable: Amount, unreclaimable: Amount, reclaimable: Amount) -> Amount:
    """min(max(allocatable − unreclaimable, 0), reclaimable), per resource."""
    return _min((max(allocatable[0] - unreclaimable[0], 0), max(allocatable[1] - unreclaimable[1], 0)), reclaimable)


@dataclass(frozen=True)
class Flags:
    """koordlet's prediction flags the predictors read."""

    cold_start_s: float = COLD_START_S  # --prediction-cold-start-duration
    margin_percent: int = SAFETY_MARGIN_PERCENT  # --prediction-safety-margin-percent


@dataclass(frozen=True)
class Reclaim:
    result: Amount
    peak: Amount
    errors: tuple[str, ...] = ()


def pod_reclaimable(pods: Iterable[PodInfo], server: Predictions, allocatable: Amount, flags: Flags = Flags()) -> Reclaim:
    """`podReclaimablePredictor`."""
    reclaimable = [0, 0]
    unreclaimable = [0, 0]
    unpredicted = [0, 0]
    seen: set[str] = set()
    errors: list[str] = []
    for info in pods:
        if priority_class(info.pod) not in RECLAIMABLE_FOR_PROD:
            continue
        if info.key in seen:
            errors.append(f"pod {info.key} already exist in the pod reclaimable predictor")
            continue
        seen.add(info.key)
        req = info.requests
        if info.age_s <= flags.cold_start_s:
            unpredicted = [unpredicted[0] + req[0], unpredicted[1] + req[1]]
            continue
        if info.leaving:
            continue
        try:
            result = server.prediction(info.key)
        except KeyError:
            unpredicted = [unpredicted[0] + req[0], unpredicted[1] + req[1]]
            errors.append(f"failed to get prediction for pod {info.key}")
            continue
        peak = _scale((result.get("p95", (0, 0))[0], result.get("p98", (0, 0))[1]), flags.margin_percent)
        unreclaimable = [unreclaimable[0] + peak[0], unreclaimable[1] + peak[1]]
        for i in (0, 1):
            if req[i] - peak[i] > 0:
                reclaimable[i] += req[i] - peak[i]
    peak_total = (unreclaimable[0] + unpredicted[0], unreclaimable[1] + unpredicted[1])
    fix = _fix(allocatable, (unreclaimable[0], unreclaimable[1]), (reclaimable[0], reclaimable[1]))
    return Reclaim(fix, peak_total, tuple(errors))


def _prediction_or_zero(server: Predictions, uid: str) -> Result:
    try:
        return server.prediction(uid)
    except KeyError:
        raise KeyError(f"failed to get prediction of {uid}") from None


def priority_reclaimable(pods: Iterable[PodInfo], server: Predictions, allocatable: Amount, flags: Flags = Flags()) -> Reclaim:
    """`priorityReclaimablePredictor`: KeyError when a node item has no prediction."""
    request = [0, 0]
    for info in pods:
        if priority_class(info.pod) not in RECLAIMABLE_FOR_PROD or info.leaving:
            continue
        req = info.requests
        request = [request[0] + req[0], request[1] + req[1]]
    sys = _prediction_or_zero(server, SYSTEM)
    un = [sys.get("p95", (0, 0))[0], sys.get("p98", (0, 0))[1]]
    for klass in CLASSES:
        if klass not in RECLAIMABLE_FOR_PROD:
            continue
        r = _prediction_or_zero(server, node_item(klass))
        un = [un[0] + r.get("p95", (0, 0))[0], un[1] + r.get("p98", (0, 0))[1]]
    unreclaimable = _scale((un[0], un[1]), flags.margin_percent)
    reclaimable = (max(request[0] - unreclaimable[0], 0), max(request[1] - unreclaimable[1], 0))
    return Reclaim(_fix(allocatable, unreclaimable, reclaimable), unreclaimable)


def prod_reclaimable(pods: Iterable[PodInfo], server: Predictions, allocatable: Amount, flags: Flags = Flags()) -> Reclaim:
    """`minPredictor` over the two: the smaller reclaimable, the larger peak."""
    pods = list(pods)
    a = pod_reclaimable(pods, server, allocatable, flags)
    b = priority_reclaimable(pods, server, allocatable, flags)
    return Reclaim(_min(a.result, b.result), (max(a.peak[0], b.peak[0]), max(a.peak[1], b.peak[1])), a.errors)


@dataclass
class Fixed:
    """A prediction table (tests): `results` by uid, else `default` (None: no prediction)."""

    results: Mapping[str, Result]
    default: Result | None = None

    def prediction(self, uid: str) -> Result:
        if uid in self.results:
            return self.results[uid]
        if self.default is None:
            raise KeyError(uid)
        return self.default
