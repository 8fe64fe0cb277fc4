"""colosim's Python front: scenarios, the SimPy environment over the Rust core, results.

    from sim import load_scenario, run_scenario

    scenario = load_scenario("experiments/clickhouse_stress.toml", ["kernel.hz=1000"])
    result = run_scenario(scenario)
    print(result)

or, one node by hand, with SimPy processes beside it:

    from sim import NodeEnvironment
    from sim.environment import warm_up

    env = NodeEnvironment(scenario.variants()[1].scenario.core_spec())
    env.process(warm_up(env, at=2.0))
    env.run(until=30.0)

The Rust extension `sim._core` is imported only when a NodeEnvironment is built, so the
schema works (and its tests run) before the extension is.
"""

from sim.environment import NodeEnvironment
from sim.errors import ScenarioError
from sim.results import ExperimentResult, RunResult
from sim.runner import run_scenario
from sim.scenario import Scenario, load_scenario

__all__ = [
    "ExperimentResult",
    "NodeEnvironment",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "run_scenario",
]
