"""The usage histograms koordlet's peak predictor keeps (pkg/util/histogram, the Kubernetes
VPA recommender's design; ../shared/reference/koordinator.md §5): weighted samples in linear
or exponentially growing buckets, percentiles read as the upper bound of the bucket where the
cumulative weight reaches them, and a decaying variant whose samples lose half their weight
every half-life.

Times are seconds. The decaying histogram keeps weights relative to a reference time and
moves the reference (rescaling by a power of two) once a sample would be weighted more than
2^100, as upstream does to stay in floating-point range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MAX_DECAY_EXPONENT = 100  # maxDecayExponent


@dataclass(frozen=True)
class Linear:
    """`NewLinearHistogramOptions`: buckets of `bucket_size` from 0 up to `max_value`."""

    max_value: float
    bucket_size: float
    epsilon: float

    @property
    def num_buckets(self) -> int:
        return math.ceil(self.max_value / self.bucket_size) + 1

    def find_bucket(self, value: float) -> int:
        return min(max(int(value / self.bucket_size), 0), self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        _check(bucket, self.num_buckets)
        return bucket * self.bucket_size


@dataclass(frozen=True)
class Exponential:
    """`NewExponentialHistogramOptions`: the first bucket `first_bucket_size` wide, each next
    `ratio` times the previous, enough of them to reach `max_value`."""

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float

    @property
    def num_buckets(self) -> int:
        return math.ceil(_log(self.ratio, self.max_value * (self.ratio - 1) / self.first_bucket_size + 1)) + 1

    def find_bucket(self, value: float) -> int:
        if value < self.first_bucket_size:
            return 0
        return min(int(_log(self.ratio, value * (self.ratio - 1) / self.first_bucket_size + 1)), self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        _check(bucket, self.num_buckets)
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (self.ratio**bucket - 1) / (self.ratio - 1)


Options = Linear | Exponential


def _log(base: float, x: float) -> float:
    return math.log(x) / math.log(base)


def _check(bucket: int, n: int) -> None:
    if not 0 <= bucket < n:
        raise IndexError(f"bucket {bucket} out of range [0..{n - 1}]")


@dataclass
class Histogram:
    options: Options
    weights: list[float] = field(default_factory=list)
    total: float = 0.0
    min_bucket: int = 0
    max_bucket: int = 0

    def __post_init__(self) -> None:
        n = self.options.num_buckets
        self.weights = [0.0] * n
        self.min_bucket, self.max_bucket = n - 1, 0

    def add(self, value: float, weight: float, t: float = 0.0) -> None:
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        b = self.options.find_bucket(value)
        self.weights[b] += weight
        self.total += weight
        eps = self.options.epsilon
        if b < self.min_bucket and self.weights[b] >= eps:
            self.min_bucket = b
        if b > self.max_bucket and self.weights[b] >= eps:
            self.max_bucket = b

    def subtract(self, value: float, weight: float, t: float = 0.0) -> None:
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        b = self.options.find_bucket(value)
        eps = self.options.epsilon
        self.total = _safe_subtract(self.total, weight, eps)
        self.weights[b] = _safe_subtract(self.weights[b], weight, eps)
        self._update_min_max()

    def merge(self, other: Histogram) -> None:
        if self.options != other.options:
            raise ValueError("can't merge histograms with different options")
        for b in range(other.min_bucket, other.max_bucket + 1):
            self.weights[b] += other.weights[b]
        self.total += other.total
        self.min_bucket = min(self.min_bucket, other.min_bucket)
        self.max_bucket = max(self.max_bucket, other.max_bucket)

    def is_empty(self) -> bool:
        return self.weights[self.min_bucket] < self.options.epsilon

    def percentile(self, p: float) -> float:
        """The upper bound of the first bucket (from the smallest) where the cumulative
        weight reaches p × total; the last bucket's start if that is the last one; 0 when
        empty."""
        if self.is_empty():
            return 0.0
        partial, threshold = 0.0, p * self.total
        b = self.min_bucket
        while b < self.max_bucket:
            partial += self.weights[b]
            if partial >= threshold:
                break
            b += 1
        if b < self.options.num_buckets - 1:
            return self.options.bucket_start(b + 1)
        return self.options.bucket_start(b)

    def equals(self, other: Histogram) -> bool:
        if self.options != other.options or (self.min_bucket, self.max_bucket) != (other.min_bucket, other.max_bucket):
            return False
        return all(abs(self.weights[b] - other.weights[b]) <= 1e-15 for b in range(self.min_bucket, self.max_bucket + 1))

    def scale(self, factor: float) -> None:
        if factor < 0:
            raise ValueError("scale factor must be non-negative")
        for b in range(self.min_bucket, self.max_bucket + 1):
            self.weights[b] *= factor
        self.total *= factor
        self._update_min_max()

    def _update_min_max(self) -> None:
        eps, last = self.options.epsilon, self.options.num_buckets - 1
        while self.weights[self.min_bucket] < eps and self.min_bucket < last:
            self.min_bucket += 1
        while self.weights[self.max_bucket] < eps and self.max_bucket > 0:
            self.max_bucket -= 1


def _safe_subtract(value: float, sub: float, eps: float) -> float:
    value -= sub
    return 0.0 if value < eps else value


@dataclass
class DecayingHistogram(Histogram):
    """`NewDecayingHistogram`: a sample at time t weighs 2^((t − reference) / half-life)."""

    half_life: float = 3600.0
    reference: float | None = None  # None: Go's zero time, before every sample

    def add(self, value: float, weight: float, t: float = 0.0) -> None:
        super().add(value, weight * self._decay_factor(t), t)

    def subtract(self, value: float, weight: float, t: float = 0.0) -> None:
        super().subtract(value, weight * self._decay_factor(t), t)

    def merge(self, other: Histogram) -> None:
        assert isinstance(other, DecayingHistogram)
        if self.half_life != other.half_life:
            raise ValueError("can't merge decaying histograms with different half life periods")
        if _before(self.reference, other.reference):
            assert other.reference is not None
            self._shift(other.reference)
        elif _before(other.reference, self.reference):
            assert self.reference is not None
            other._shift(self.reference)
        super().merge(other)

    def equals(self, other: Histogram) -> bool:
        return (
            isinstance(other, DecayingHistogram)
            and self.half_life == other.half_life
            and self.reference == other.reference
            and super().equals(other)
        )

    def _shift(self, new_reference: float) -> None:
        """Move the reference to `new_reference` rounded to a whole half-life (Go's
        time.Round, halves up), scaling every weight by 2^(old − new) in half-lives."""
        new = math.floor(new_reference / self.half_life + 0.5) * self.half_life
        if self.reference is not None:
            exponent = math.floor((self.reference - new) / self.half_life + 0.5)
            self.scale(math.ldexp(1.0, exponent))
        self.reference = new

    def _decay_factor(self, t: float) -> float:
        if self.reference is None or t > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            self._shift(t)
        assert self.reference is not None
        return 2.0 ** ((t - self.reference) / self.half_life)


def _before(a: float | None, b: float | None) -> bool:
    """a is earlier than b (None is Go's zero time, the earliest)."""
    if b is None:
        return False
    return a is None or a < b
