"""Policy agents that drive cgroups through one seam (../shared/DESIGN.md, "The one seam").

    from policies import build_policy, PolicyRunner, SimBackend
    policy = build_policy({"name": "rubik", "quota_turbo": ["online"]})
    runner = PolicyRunner(policy, SimBackend(env))
    env.process(runner.process(env))

`none` (fair sharing by requests), `static` (BE as cpu.idle or qos_level), `rubik`
(absolute preemption, quota burst, quotaTurbo) and `koordinator` (CPU suppress, cpuset and
cfsQuota) are here; Koordinator's CPU burst, evict and bind policies are still to come.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies.cgroup import Backend, CgroupStats, Knob, KnobWrite, NodeStats, SimBackend
from policies.koordinator import Koordinator
from policies.pods import Pod
from policies.policy import Decision, Observation, Param, Policy, PolicyError, PolicyRunner
from policies.rubik import Rubik
from policies.static import NoIsolation, Static

POLICIES: dict[str, type[Policy]] = {p.name: p for p in (NoIsolation, Static, Rubik, Koordinator)}


def build_policy(table: Mapping[str, Any], where: str = "policy", pods: Iterable[Pod] = ()) -> Policy:
    """A policy from its configuration table: `name` picks it, the rest configures it; the
    node's pods (if the scenario has any) fill in what the table leaves out."""
    config = dict(table)
    name = config.pop("name", None)
    if not isinstance(name, str) or name not in POLICIES:
        raise PolicyError(f"{where}.name: unknown policy {name!r} (known: {', '.join(POLICIES)})")
    policy = POLICIES[name](config, where)
    policy.use_pods(tuple(pods))
    return policy


__all__ = [
    "Backend",
    "CgroupStats",
    "Decision",
    "Knob",
    "KnobWrite",
    "NodeStats",
    "Observation",
    "Param",
    "Policy",
    "PolicyError",
    "PolicyRunner",
    "SimBackend",
    "POLICIES",
    "build_policy",
]
