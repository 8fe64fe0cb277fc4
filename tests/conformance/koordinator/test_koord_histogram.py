"""The peak predictor's histograms (policies/histogram.py) against their own unit tests,
pkg/util/histogram/{histogram,histogram_options,decaying_histogram}_test.go at koordinator
a7a1b76 (from the Kubernetes VPA recommender). Times in seconds; a half-life of 1 h is 3600."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.histogram import DecayingHistogram, Exponential, Histogram, Linear

H = "pkg/util/histogram/histogram_test.go"
OPT = "pkg/util/histogram/histogram_options_test.go"
D = "pkg/util/histogram/decaying_histogram_test.go"
WEIGHT_EPS = 1e-15
OPTIONS = Linear(10.0, 1.0, WEIGHT_EPS)  # testHistogramOptions
START = 1234567890.0  # time.Unix(1234567890, 0)
HOUR = 3600.0


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-15)


def one_to_four(h: Histogram, spaced: float = 0.0) -> Histogram:
    """Samples 1..4 with weights 1..4, `spaced` seconds apart from START."""
    for i in range(1, 5):
        h.add(float(i), float(i), START + (i - 1) * spaced)
    return h


# (value, percentile) pairs both the plain histogram and the undecayed one give
ONE_TO_FOUR = [(2, 0.0), (2, 0.1), (3, 0.2), (3, 0.3), (4, 0.4), (4, 0.5), (4, 0.6), (5, 0.7), (5, 0.8), (5, 0.9), (5, 1.0)]


@pytest.mark.parametrize(
    "make",
    [
        case(H, "TestPercentilesEmptyHistogram", "", lambda: Histogram(OPTIONS)),
        case(D, "TestPercentilesEmptyDecayingHistogram", "", lambda: DecayingHistogram(OPTIONS, half_life=HOUR)),
    ],
)
def test_percentiles_of_an_empty_histogram(make) -> None:
    h = make()
    assert [h.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


@pytest.mark.parametrize(
    "h",
    [
        case(H, "TestPercentiles", "", one_to_four(Histogram(OPTIONS))),
        case(D, "TestNoDecay", "", one_to_four(DecayingHistogram(OPTIONS, half_life=HOUR))),
    ],
)
def test_percentiles(h: Histogram) -> None:
    for want, p in ONE_TO_FOUR:
        assert h.percentile(p) == approx(want)


@pytest.mark.parametrize("sub", [case(H, "TestPercentileOutOfBounds", "", None)])
def test_percentile_out_of_bounds(sub: None) -> None:
    h = Histogram(Linear(1.0, 0.1, WEIGHT_EPS))
    h.add(0.1, 0.1)
    h.add(0.2, 0.2)
    assert h.percentile(-0.1) == approx(0.2) and h.percentile(1.1) == approx(0.3)
    # fill the boundary buckets
    h.add(0.0, 0.1)
    h.add(1.0, 0.2)
    assert h.percentile(-0.1) == approx(0.1) and h.percentile(1.1) == approx(1.0)


@pytest.mark.parametrize("sub", [case(H, "TestEmptyHistogram", "", None)])
def test_empty_histogram(sub: None) -> None:
    h = Histogram(Linear(1.0, 0.1, WEIGHT_EPS))
    assert h.is_empty()
    h.add(0.1, WEIGHT_EPS * 2.5)
    assert not h.is_empty()
    h.subtract(0.1, WEIGHT_EPS)  # 1.5 epsilon left
    assert not h.is_empty()
    h.subtract(0.1, WEIGHT_EPS)  # 0.5 epsilon left
    assert h.is_empty()


@pytest.mark.parametrize("sub", [case(H, "TestNonEmptyOnEpsilonAddition", "", None)])
def test_non_empty_on_epsilon_addition(sub: None) -> None:
    h = Histogram(Linear(1.0, 0.1, WEIGHT_EPS))
    h.add(9.9, WEIGHT_EPS * 3)
    assert not h.is_empty()
    h.add(0.1, WEIGHT_EPS * 0.3)
    assert not h.is_empty()
    h.add(999.9, WEIGHT_EPS * 0.3)
    assert not h.is_empty()


@pytest.mark.parametrize("sub", [case(H, "TestHistogramMerge", "", None)])
def test_merge(sub: None) -> None:
    h1, h2, want = Histogram(OPTIONS), Histogram(OPTIONS), Histogram(OPTIONS)
    for v in (1, 2):
        h1.add(v, 1)
    for v in (2, 3):
        h2.add(v, 1)
    for v in (1, 2, 2, 3):
        want.add(v, 1)
    h1.merge(h2)
    assert h1.equals(want)


@pytest.mark.parametrize("sub", [case(OPT, "TestLinearHistogramOptions", "", None)])
def test_linear_options(sub: None) -> None:
    o = Linear(5.0, 0.3, 0.001)
    assert (o.epsilon, o.num_buckets, o.bucket_start(0), o.bucket_start(17)) == (0.001, 18, 0.0, 5.1)
    assert [o.find_bucket(v) for v in (-1.0, 0.0, 1.3, 100.0)] == [0, 0, 4, 17]


@pytest.mark.parametrize("sub", [case(OPT, "TestExponentialHistogramOptions", "", None)])
def test_exponential_options(sub: None) -> None:
    o = Exponential(500.0, 40.0, 1.5, 0.001)
    assert (o.epsilon, o.num_buckets) == (0.001, 6)
    assert [o.bucket_start(b) for b in range(6)] == [0.0, 40.0, 100.0, 190.0, 325.0, 527.5]
    assert [o.find_bucket(v) for v in (-1.0, 39.99, 40.0, 100.0, 900.0)] == [0, 0, 1, 2, 5]


@pytest.mark.parametrize("sub", [case(D, "TestSimpleDecay", "", None)])
def test_simple_decay(sub: None) -> None:
    h = DecayingHistogram(OPTIONS, half_life=HOUR)
    h.add(2, 1000, START)
    h.add(1, 1, START + 20 * HOUR)  # 2^20 × 0.001 > 1000 times the first
    assert h.percentile(0.999) == approx(2) and h.percentile(1.0) == approx(3)


@pytest.mark.parametrize("sub", [case(D, "TestLongtermDecay", "", None)])
def test_longterm_decay(sub: None) -> None:
    h = DecayingHistogram(OPTIONS, half_life=HOUR)
    h.add(2, 1, START)
    h.add(1, 1, START + 101 * HOUR)  # past 2^maxDecayExponent: the first sample is gone
    assert h.percentile(1.0) == approx(2)


@pytest.mark.parametrize("sub", [case(D, "TestDecayingHistogramPercentiles", "", None)])
def test_decaying_percentiles(sub: None) -> None:
    h = one_to_four(DecayingHistogram(OPTIONS, half_life=HOUR), spaced=HOUR)
    # weights 1/8, 2/4, 3/2, 4: cumulative 2%, 10%, 34%, 100%
    for want, p in [(2, 0.0), (2, 0.02), (3, 0.03), (3, 0.10), (4, 0.11), (4, 0.34), (5, 0.35), (5, 1.0)]:
        assert h.percentile(p) == approx(want)


@pytest.mark.parametrize("sub", [case(D, "TestDecayingHistogramMerge", "", None)])
def test_decaying_merge(sub: None) -> None:
    h1, h2, want = (DecayingHistogram(OPTIONS, half_life=HOUR) for _ in range(3))
    h1.add(1, 1, START)
    h1.add(2, 1, START + HOUR)
    h2.add(2, 1, START + 2 * HOUR)
    h2.add(3, 1, START + HOUR)
    for v, t in ((2, 2), (2, 1), (3, 1), (1, 0)):
        want.add(v, 1, START + t * HOUR)
    h1.merge(h2)
    assert h1.equals(want)
