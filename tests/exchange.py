"""A client and a server that talk, as the hand-worked exchange tests build them (cross_cpu,
cpuidle, remote_wakeup): one client of one worker, 0.5 ms of the generator's CPU on one
generator thread and 1 ms of service a request, in cgroup "kv"."""

from __future__ import annotations

from sim.scenario import Scenario


def kv(cpus: int, node: dict | None = None, workloads: dict | None = None, cgroups: dict | None = None, **extra) -> Scenario:
    """The pair on `cpus` CPUs; `node` adds to [node], `workloads`/`cgroups` add tenants,
    `extra` changes the pair's own fields."""
    web = {
        "kind": "closed_loop",
        "cgroup": "kv",
        "clients": 1,
        "workers": 1,
        "client_cpu": {"dist": "constant", "value": "500us"},
        "service": {"dist": "constant", "value": "1ms"},
        **extra,
    }
    doc = {
        "scenario": {"name": "exchange", "duration": "6s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
        "node": {"cores_per_socket": cpus, **(node or {})},
        "cgroups": {"kv": {}, **(cgroups or {})},
        "workloads": {"kv": web, **(workloads or {})},
    }
    return Scenario.from_document(doc)
