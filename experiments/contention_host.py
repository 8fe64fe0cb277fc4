"""Shared hardware on this host: nginx + wrk and redis + redis-benchmark beside stress-ng
--cache / --stream / --matrix and stress --cpu, without (shared) and with (split) CPU
separation, interleaved rounds (replay/contention_host.py; docs/replay.md, "Shared hardware
on this host"). Run as root from the repository:

    PYTHONPATH=. python experiments/contention_host.py --reps 3 --seconds 6 \\
        --out experiments/data/contention_host.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from replay.contention_host import ANTAGONIST_ARGS, ANTAGONISTS, ARRANGEMENTS, SERVICES, cases, host_cache, measure, ratios


def summary(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4), "n": len(values)}


COLUMNS = (
    ("shared", "service", "shared: service /s"),
    ("split", "service", "split: service /s"),
    ("shared", "service_per_cpu", "shared: service per CPU-s"),
    ("split", "service_per_cpu", "split: service per CPU-s"),
    ("split", "antagonist_per_cpu", "split: antagonist per CPU-s"),
)


def table(doc: dict[str, Any]) -> str:
    """Markdown: per service and antagonist, the rates relative to alone in the same round
    (median, min–max over rounds): per second of wall time and per second of the CPU time the
    workload got."""

    def cell(s: dict[str, Any] | None) -> str:
        return "—" if s is None else f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"

    r = doc["ratios"]
    cols = [c for c in COLUMNS if any(k.endswith("/" + c[0]) for k in r)]
    lines = ["| service | antagonist | " + " | ".join(c[2] for c in cols) + " |", "|---|---|" + "---|" * len(cols)]
    for svc in doc["services"]:
        for ant in doc["antagonists"]:
            cells = [cell(r.get(f"{svc}/{ant}/{arr}", {}).get(ratio)) for arr, ratio, _ in cols]
            lines.append(f"| {svc} | {ant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--services", default=",".join(SERVICES))
    ap.add_argument("--antagonists", default=",".join(ANTAGONISTS))
    ap.add_argument("--arrangements", default=",".join(ARRANGEMENTS))
    ap.add_argument("--wait", type=float, default=3600.0, help="seconds to wait for another replay to finish (default 3600)")
    ap.add_argument("--table", type=Path, help="only print the table of a document written before")
    ap.add_argument("--out", type=Path, default=Path("experiments/data/contention_host.json"))
    a = ap.parse_args(argv)
    if a.table:
        print(table(json.loads(a.table.read_text())))
        return 0
    services, ants, arrs = a.services.split(","), a.antagonists.split(","), a.arrangements.split(",")
    for name, given, known in (
        ("--services", services, SERVICES),
        ("--antagonists", ants, ANTAGONISTS),
        ("--arrangements", arrs, ARRANGEMENTS),
    ):
        bad = [x for x in given if x not in known]
        if bad:
            print(f"{name}: unknown {', '.join(bad)} (known: {', '.join(known)})", file=sys.stderr)
            return 2
    rows = measure(cases(services, ants, arrs), a.reps, a.seconds, a.seed, lambda m: print(m, file=sys.stderr, flush=True), a.wait)
    r = ratios(rows)
    doc = {
        "command": "PYTHONPATH=. python experiments/contention_host.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "host": host_cache(),
        "seconds": a.seconds,
        "reps": a.reps,
        "services": services,
        "antagonists": ants,
        "antagonist_argv": {k: ANTAGONIST_ARGS[k] for k in ants},
        "ratios": {k: {role: summary(v) for role, v in d.items()} for k, d in r.items()},
        "ratio_values": r,
        "rows": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
