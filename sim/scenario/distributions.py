"""Distributions of service and think times (`dist = "constant" | "exponential" | ...`)."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from sim.scenario.base import Duration, FieldError, FieldErrors, PositiveDuration, Table


class Constant(Table):
    dist: Literal["constant"]
    value: Duration

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "constant", "value_ns": self.value}


class Exponential(Table):
    dist: Literal["exponential"]
    mean: PositiveDuration

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "exponential", "mean_ns": self.mean}


class Lognormal(Table):
    dist: Literal["lognormal"]
    mean: PositiveDuration
    # sigma of the underlying normal, as numpy and the core take it
    sigma: float = Field(ge=0, allow_inf_nan=False)

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "lognormal", "mean_ns": self.mean, "sigma": self.sigma}


class Empirical(Table):
    """A histogram: bin i spans edges[i]..edges[i+1] and is picked with weight weights[i]."""

    dist: Literal["empirical"]
    edges: list[Duration] = Field(min_length=2)
    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Empirical:
        errors: list[FieldError] = []
        if len(self.edges) != len(self.weights) + 1:
            errors.append(
                (
                    ("edges",),
                    f"must have one more item than weights (got {len(self.edges)} edges, {len(self.weights)} weights)",
                )
            )
        for i in range(1, len(self.edges)):
            if self.edges[i] <= self.edges[i - 1]:
                errors.append((("edges", i), "must be greater than the edge before it"))
        if sum(self.weights) <= 0:
            errors.append((("weights",), "must not all be 0"))
        if errors:
            raise FieldErrors(errors)
        return self

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "empirical", "edges_ns": list(self.edges), "weights": list(self.weights)}


def _distribution_shorthand(value: Any) -> Any:
    # `think = "0s"` or `service = "48ms"`: a bare duration means a constant.
    if isinstance(value, dict):
        return value
    return {"dist": "constant", "value": value}


Distribution = Annotated[
    Constant | Exponential | Lognormal | Empirical,
    Field(discriminator="dist"),
    BeforeValidator(_distribution_shorthand),
]


def mean_s(d: Any) -> float:
    if d.dist == "constant":
        return d.value / 1e9
    if d.dist in ("exponential", "lognormal"):
        return d.mean / 1e9
    mids = [(a + b) / 2 for a, b in pairwise(d.edges)]
    return sum(m * w for m, w in zip(mids, d.weights, strict=True)) / sum(d.weights) / 1e9
