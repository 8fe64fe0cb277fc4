"""Trace players: SimPy processes that set a workload's demand from a trace as the run goes
(a duty workload's cores and memory, an open loop's request rate), time optionally
compressed."""

from __future__ import annotations

from collections.abc import Generator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from traces.format import Trace, TraceError, read

if TYPE_CHECKING:
    from sim.environment import NodeEnvironment

MIN_RATE = 1e-3  # an open loop's rate must stay > 0: a silent moment is a very slow one


@lru_cache(maxsize=16)
def _cached(path: str, mtime: float) -> Trace:
    return read(path)


def load(path: str) -> Trace:
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{path}: no such file")
    return _cached(str(p.resolve()), p.stat().st_mtime)


def series(trace: Trace, entity: str, column: str, per_request_s: float | None, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) the player plays: a column of an entity (the rate of a service without
    one from its CPU ÷ the mean service time)."""
    e = trace.entities.get(entity)
    if e is None:
        raise TraceError(f"{where}.entity: no entity {entity!r} in {trace.source} (entities: {', '.join(list(trace.entities)[:10])})")
    if column == "rate_per_s":
        if e.rate_per_s is not None and not np.isnan(e.rate_per_s).any():
            return e.t_s, e.rate_per_s
        if per_request_s is None or per_request_s <= 0:
            raise TraceError(f"{where}: entity {entity!r} has no rate_per_s, and no mean service time to derive it from")
        return e.t_s, e.cpu_cores / per_request_s
    return e.t_s, e.cpu_cores


def play(
    env: NodeEnvironment, workload: str, key: str, times_s: np.ndarray, values: np.ndarray, speed: float, scale: float
) -> Generator[Any, Any, None]:
    """Set `key` of `workload` to each value at its (compressed) time."""
    t0 = float(times_s[0]) if len(times_s) else 0.0
    for t, v in zip(times_s, values, strict=True):
        at = (float(t) - t0) / speed
        if at > env.now:
            yield env.timeout(at - env.now)
        if np.isnan(v):
            continue  # not recorded at this sample: the last value holds
        value = float(v) * scale
        if key == "rate_per_s":
            value = max(value, MIN_RATE)
        env.node.set_workload(workload, key, value)
