"""The generator's threads and the cost of an exchange across CPUs, piece by piece, against one
fidelity suite's host runs (docs/replay.md, "An exchange across CPUs"): `colosim fidelity
--repredict` on copies of a suite's fidelity.json (redis, nginx, postgres) whose scenarios undo
one piece each —

    client_threads as replay runs the generator, cross_cpu    today's calibration
    client_threads as replay runs the generator               no cross_cpu
    a generator task per client, cross_cpu                    (client_threads = "clients")
    a generator task per client                               before

    python experiments/cross_cpu_ablation.py out/fidelity/fidelity.json [--out out/cross_cpu_ablation]

Nothing runs on the host: every variant is calibrated and predicted from the same kept alone
runs and scored against the same host runs. "A generator task per client" is
`client_threads = "clients"`, as every closed loop had before the calibration set the threads.
"""

from __future__ import annotations

import copy
import re
import statistics
import sys
from pathlib import Path

from repredict import repredict, suite_from_command_line

SERVICES = ("redis", "nginx", "postgres")
VARIANTS = (
    ("generator threads + cross_cpu (now)", False, False),
    ("generator threads, no cross_cpu", False, True),
    ("a task per client + cross_cpu", True, False),
    ("a task per client, no cross_cpu (before)", True, True),
)
METRICS = ("QPS", "P50 (s)", "P99 (s)")


def variant_toml(text: str, per_client: bool, no_cross: bool) -> str:
    """The scenario with its cross_cpu line dropped and/or a generator task per client."""
    if no_cross:
        text = re.sub(r"(?m)^cross_cpu = .*\n", "", text)
    if per_client:
        text = re.sub(r"(?m)^(clients = \d+.*\n)", r'\1client_threads = "clients"\n', text, count=1)
    return text


def main() -> int:
    src, out = suite_from_command_line(__doc__.splitlines()[0], "out/cross_cpu_ablation")
    missing = [s for s in SERVICES if s not in src["services"]]
    if missing:
        sys.exit(f"the suite has no {', '.join(missing)}")
    print("| variant | " + " | ".join(f"{s} QPS / P50 / P99" for s in SERVICES) + " | all three |")
    print("|---|" + "---|" * (len(SERVICES) + 1))
    for k, (name, per_client, no_cross) in enumerate(VARIANTS):
        doc = copy.deepcopy(src)
        doc["services"] = {s: doc["services"][s] for s in SERVICES}
        for s in SERVICES:
            path = out / f"{s}_{k}.toml"
            path.write_text(variant_toml(Path(doc["services"][s]["scenario"]).read_text(), per_client, no_cross))
            doc["services"][s]["scenario"] = str(path.resolve())
        got = repredict(doc, out, k)
        cells, every = [], {m: [] for m in METRICS}
        for s in SERVICES:
            scores = got["services"][s]["scores"]
            errs = {m: [abs(c[m]["error"]) for case, c in scores.items() if case != "alone"] for m in METRICS}
            for m in METRICS:
                every[m] += errs[m]
            cells.append(" / ".join(f"{statistics.median(errs[m]) * 100:.1f}%" for m in METRICS))
        cells.append(" / ".join(f"{statistics.median(every[m]) * 100:.1f}%" for m in METRICS))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n(median |error| over the 4 colocated cases; each variant's suite in {out}/K)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
