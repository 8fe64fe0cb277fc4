"""A SimPy environment whose clock drives the node simulated by the Rust core.

SimPy time is in seconds (float); the core counts integer nanoseconds.  Before SimPy
processes an event at time t, the core is advanced to t, so a SimPy process sees the node
exactly as it is at its own time and may read stats or write knobs between steps:

    env = NodeEnvironment(scenario.core_spec())

    def suppress(env):                      # a policy agent is a plain SimPy process
        while True:
            yield env.timeout(1.0)
            if env.node.cgroup_stats("online")["wait_ns"] > 0:
                env.node.write("offline", "cpu.shares", 2)

    env.process(suppress(env))
    env.process(warm_up(env, at=2.0))
    env.run(until=30.0)                     # the core is now exactly at 30 s

The core runs on its own between SimPy events (no Python call per simulated event).
"""

from __future__ import annotations

import json
import math
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

import simpy

from sim.errors import ColosimError, SpecRefused

if TYPE_CHECKING:
    from sim._core import Node

NS_PER_S = 1_000_000_000


def to_ns(seconds: float) -> int:
    return round(seconds * NS_PER_S)


class CoreNotBuilt(ColosimError, ImportError):
    """The Rust extension sim._core is missing: the package was not built with maturin."""


def _core_node(spec_json: str) -> Node:
    # Imported here, not at module level, so `import sim` works before maturin has built the
    # extension (schema checks and tests need no core); tests also replace this function.
    try:
        from sim import _core
    except ImportError as err:
        raise CoreNotBuilt(
            "the simulator core sim._core is not built; build it with `maturin develop --release` (or `pip install .`) in the repository"
        ) from err
    return _core.Node(spec_json)


class NodeEnvironment(simpy.Environment):
    """simpy.Environment that owns a `sim._core.Node` and keeps it at SimPy's clock.

    `spec` is the core spec (a dict, or its JSON text); `node` takes an already built node
    instead (a test double, or a node from elsewhere).
    """

    def __init__(self, spec: Mapping[str, Any] | str | None = None, *, node: Node | None = None) -> None:
        super().__init__(initial_time=0.0)
        if node is None:
            if spec is None:
                raise TypeError("NodeEnvironment needs a core spec or a node")
            try:
                node = _core_node(spec if isinstance(spec, str) else json.dumps(spec))
            except (ValueError, KeyError) as err:  # the core refuses its input so (sim/_core.pyi)
                raise SpecRefused(str(err.args[0]) if err.args else str(err)) from None
        self.node = node
        # SimPy time at which the stats were last reset: what results measure from.
        self.stats_since = 0.0

    @property
    def now_ns(self) -> int:
        return self.node.now()

    def step(self) -> None:
        """Advance the core to the next event's time, then let SimPy process the event.

        `run(until=t)` ends with SimPy's own stop event at t, which passes through here,
        so the core ends exactly at t.
        """
        t = self.peek()
        if not math.isinf(t):
            t_ns = to_ns(t)
            if t_ns > self.node.now():
                self.node.run_until(t_ns)
        super().step()

    def reset_stats(self) -> None:
        """Zero the core's counters and latency records: measurement starts now."""
        self.node.reset_stats()
        self.stats_since = self.now


def warm_up(env: NodeEnvironment, at: float) -> Generator[simpy.Event, Any, None]:
    """Process that ends the warm-up: resets the stats at `at` seconds.

    Usage: `env.process(warm_up(env, at=2.0))`.
    """
    if at > env.now:
        yield env.timeout(at - env.now)
    env.reset_stats()
