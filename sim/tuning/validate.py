"""`colosim tune ... --validate`: the default and the best configuration replayed on this
host (real cgroups, real workloads, `colosim replay --compare` for each), and the
simulator's prediction set beside the measurement for both — so the gain the study claims is
checked where it would be deployed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.compare import error
from sim.results import markdown, sig3
from sim.tuning.space import policy_table
from sim.tuning.spec import TuneSpec

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial


def validate(spec: TuneSpec, default: FrozenTrial | None, best: FrozenTrial | None, out: Path) -> int:
    from replay.compare import replay
    from sim.overrides import combine

    configs = [(label, t) for label, t in (("default", default), ("best", best)) if t is not None]
    if not configs:
        print("validate: nothing to replay (no default or best trial)")
        return 0
    docs = {}
    for label, trial in configs:
        table = policy_table(spec.fixed, trial.params, spec.dims)
        print(f"\n== validate: {label} configuration on this host ==")
        replay(spec.path, combine(spec.overrides, {"policy": table}), spec.seeds[0], out / label, compare=True, dry_run=False)
        docs[label] = json.loads((out / label / "comparison.json").read_text())
    print("\n" + table_text(docs))
    return 0


def table_text(docs: dict[str, dict[str, Any]]) -> str:
    """Per configuration, run and metric: predicted, measured, error."""
    rows = []
    for label, doc in docs.items():
        for run, v in doc["variants"].items():
            for metric, measured in v["measured"].items():
                if not (metric.endswith("(s)") or metric.endswith("QPS") or metric.startswith("batch")):
                    continue
                predicted = v["predicted"].get(metric)
                m = math.nan if measured is None else measured
                p = math.nan if predicted is None else predicted
                e = error(m, p)
                rows.append([label, run, metric, sig3(p), sig3(m), f"{e * 100:+.1f}%" if math.isfinite(e) else "-"])
    text = "predicted (simulator, calibrated on this host) vs measured (this host)\n" + markdown(
        ["config", "run", "metric", "predicted", "measured", "error"], rows
    )
    # a prediction is only as good as the service model fitted to the alone run: say when not
    for label, doc in docs.items():
        cal = doc.get("calibration") or {}
        for name, fit in (cal.get("services") or {}).items():
            if fit.get("quality") == "poor":
                why = ", ".join(fit.get("poor_metrics") or []) or "the host was disturbed"
                text += f"\n{label}: the service model of {name} fits its alone run poorly ({why}): these errors include it"
    return text
