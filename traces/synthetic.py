"""Synthetic traces, seeded: a diurnal online service (a day-shaped rate with noise and
spikes) and bursty batch arrivals (jobs arriving in a Poisson process, each holding some
cores for a while)."""

from __future__ import annotations

import math

import numpy as np

from traces.format import Entity, Trace


def diurnal(
    name: str,
    duration_s: float,
    step_s: float,
    peak_rate: float,
    trough_rate: float,
    cpu_per_request_s: float,
    seed: int,
    period_s: float = 86_400.0,
    peak_at_s: float = 14 * 3600.0,
    noise: float = 0.05,
    spikes_per_day: float = 4.0,
    spike_factor: float = 1.8,
    spike_s: float = 300.0,
) -> Entity:
    """An online service whose request rate follows a cosine day (peak at `peak_at_s`),
    multiplied by lognormal noise (sigma `noise`) and, at Poisson-spaced moments, spikes of
    `spike_factor` for `spike_s`; CPU used = rate × CPU per request."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s, step_s)
    phase = 2 * math.pi * (t - peak_at_s) / period_s
    rate = trough_rate + (peak_rate - trough_rate) * (1 + np.cos(phase)) / 2
    rate = rate * np.exp(rng.normal(0.0, noise, len(t)) - noise**2 / 2)
    n_spikes = rng.poisson(spikes_per_day * duration_s / period_s)
    for start in rng.uniform(0, duration_s, n_spikes):
        rate[(t >= start) & (t < start + spike_s)] *= spike_factor
    return Entity(name, "online", t, rate * cpu_per_request_s, rate_per_s=rate)


def bursty_batch(
    name: str,
    duration_s: float,
    step_s: float,
    jobs_per_hour: float,
    mean_cores: float,
    mean_runtime_s: float,
    seed: int,
    max_cores: float | None = None,
) -> Entity:
    """Batch jobs arriving as a Poisson process; each holds an exponential number of cores
    (mean `mean_cores`) for an exponential time (mean `mean_runtime_s`); the entity's CPU is
    their sum per step (capped at `max_cores`)."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s, step_s)
    cpu = np.zeros(len(t))
    n = rng.poisson(jobs_per_hour * duration_s / 3600.0)
    for start, cores, run in zip(
        rng.uniform(0, duration_s, n), rng.exponential(mean_cores, n), rng.exponential(mean_runtime_s, n), strict=True
    ):
        cpu[(t >= start) & (t < start + run)] += cores
    if max_cores is not None:
        cpu = np.minimum(cpu, max_cores)
    return Entity(name, "offline", t, cpu)


def day(seed: int, duration_s: float = 86_400.0, step_s: float = 60.0) -> Trace:
    """A ready-made colocation day: one diurnal service and bursty batch."""
    tr = Trace(source=f"synthetic day, seed {seed}")
    tr.add(diurnal("web", duration_s, step_s, peak_rate=400.0, trough_rate=80.0, cpu_per_request_s=0.02, seed=seed))
    tr.add(bursty_batch("batch", duration_s, step_s, jobs_per_hour=6.0, mean_cores=4.0, mean_runtime_s=1800.0, seed=seed + 1))
    return tr
