"""A policy's search space as data: the `Param`s it declares (policies/*.py), narrowed by the
user, as Optuna distributions.  The objective never sees Optuna: a trial's parameters become
a plain `[policy]` table (`policy_table`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policies import POLICIES
from policies.policy import Param, Policy
from sim.errors import ScenarioError

if TYPE_CHECKING:
    from optuna.distributions import FloatDistribution, IntDistribution


@dataclass(frozen=True)
class Dimension:
    """One tuned parameter: the policy's Param with the range searched."""

    param: Param
    low: float
    high: float

    @property
    def name(self) -> str:
        return self.param.name

    @property
    def default(self) -> float:
        return self.param.default

    def distribution(self) -> IntDistribution | FloatDistribution:
        import optuna

        if self.param.integer:
            return optuna.distributions.IntDistribution(int(self.low), int(self.high))
        return optuna.distributions.FloatDistribution(self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "low": self.low, "high": self.high, "default": self.default, "integer": self.param.integer}


def policy_class(name: str, where: str) -> type[Policy]:
    if name not in POLICIES:
        raise ScenarioError(f"{where}: unknown policy {name!r} (known: {', '.join(POLICIES)})")
    return POLICIES[name]


def search_space(policy: type[Policy], chosen: Mapping[str, tuple[float, float] | None] | None, where: str) -> list[Dimension]:
    """The dimensions to search: `chosen` maps parameter names to a (low, high) range within
    the declared one, or None for the whole range; without `chosen`, the policy's `tuned`
    parameters over their declared ranges."""
    declared = {p.name: p for p in policy.search_space()}
    if chosen is None:
        chosen = {n: None for n in policy.tuned}
    if not chosen:
        raise ScenarioError(f"{where}: policy {policy.name} has nothing to tune here (its parameters: {', '.join(declared) or 'none'})")
    dims = []
    for name, rng in chosen.items():
        if name not in declared:
            raise ScenarioError(f"{where}: {name!r} is not a parameter of {policy.name} (known: {', '.join(declared) or 'none'})")
        p = declared[name]
        low, high = (p.low, p.high) if rng is None else rng
        if not p.low <= low < high <= p.high:
            raise ScenarioError(f"{where}.{name}: range [{low:g}, {high:g}] must be increasing and within [{p.low:g}, {p.high:g}]")
        if p.integer and (low != int(low) or high != int(high)):
            raise ScenarioError(f"{where}.{name}: an integer parameter needs an integer range (got [{low:g}, {high:g}])")
        dims.append(Dimension(p, low, high))
    return dims


def parse_range(text: str, where: str) -> tuple[str, tuple[float, float] | None]:
    """`--param NAME` or `--param NAME=LOW:HIGH`."""
    name, eq, rng = text.partition("=")
    name = name.strip()
    if not name:
        raise ScenarioError(f"{where}: give a parameter name (NAME or NAME=LOW:HIGH), got {text!r}")
    if not eq:
        return name, None
    low, colon, high = rng.partition(":")
    try:
        if not colon:
            raise ValueError
        return name, (float(low), float(high))
    except ValueError:
        raise ScenarioError(f"{where}: {name}'s range reads LOW:HIGH, e.g. {name}=40:90 (got {rng!r})") from None


def policy_table(fixed: Mapping[str, Any], values: Mapping[str, Any], dims: list[Dimension]) -> dict[str, Any]:
    """The `[policy]` table of a trial: the scenario's fixed configuration with the trial's
    values (integers as integers, so the file reads as the agent's config does)."""
    table = dict(fixed)
    for d in dims:
        v = values[d.name]
        table[d.name] = int(v) if d.param.integer else float(v)
    return table
