"""Figures of every experiment's runs (10 simulated s each) to compare two extensions bit
for bit: per service a digest of its latencies and completion times, per cgroup its CPU.

tests/data/unshaped_runs.json holds them as the extension before workload shapes gave them
(main at 5095557); tests/test_shapes.py checks that today's extension gives the very same,
unshaped and with a one-burst shape. After a deliberate change to the model, write them anew:

    PYTHONPATH=. python tests/shape_figures.py tests/data/unshaped_runs.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim import load_scenario, run_scenario

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
# the scenario overrides every figure is taken with: short, and long enough for every mechanism
SHORT = {"scenario.duration": "10s", "scenario.warmup": "1s"}
# experiments that need generated trace files (out/traces/...) are left out
NEEDS_TRACES = ("alibaba_machine.toml", "tune_fleet.toml")


def figures(file: str, overrides: Mapping[str, Any] = SHORT) -> dict[str, dict[str, Any]]:
    """{run name: {service: [started, completed, digest], "cg:NAME": cpu_s}} of one experiment."""
    result = run_scenario(load_scenario(EXPERIMENTS / file, overrides), progress=False)
    out = {}
    for name, run in result.runs.items():
        row: dict[str, Any] = {}
        for s_name, s in run.services.items():
            digest = hashlib.sha256(s.latencies_s.tobytes() + s.completions_s.tobytes()).hexdigest()[:16]
            row[s_name] = [s.started, s.completed, digest]
        for c_name, c in run.cgroups.items():
            row[f"cg:{c_name}"] = repr(c.cpu_s)
        out[name] = row
    return out


def main(path: str) -> None:
    """Write the figures anew: of the experiments the file already holds (what test_shapes.py
    checks), or of every experiment that needs no trace file when there is none yet."""
    out = Path(path)
    if out.exists():
        files = sorted(json.loads(out.read_text()))
    else:
        files = sorted(p.name for p in EXPERIMENTS.glob("*.toml") if p.name not in NEEDS_TRACES)
    out.write_text(json.dumps({f: figures(f) for f in files}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
