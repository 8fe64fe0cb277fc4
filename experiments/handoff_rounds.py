"""How ClickHouse and clickhouse-benchmark hand the CPU to each other, per query, from the probe
of `colosim replay experiments/handoff_probe.toml --probe` (docs/replay.md, "The client's
rounds"). Per run of each comparison.json given: queries in the probed window (the generator's
QPS x the window), then for the client (clickhouse-benchmark's threads), the server's query
threads (TCPHandler, one per connection, and the AsyncBlockInput threads it starts per query)
and the rest of the server: CPU, voluntary and involuntary switches per query, the mean run
between two voluntary switches (a burst, ended by a sleep) and per timeslice.

    python experiments/handoff_rounds.py out/handoff_probe_1 out/handoff_probe_2 ...
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

QUERY_THREADS = ("TCPHandler", "AsyncBlockInput")


def side(t: dict) -> str:
    if t["process"].startswith("clickhouse-benc"):
        return "client"
    if t["process"].startswith("clickhouse-serv"):
        return "server query" if t["comm"].startswith(QUERY_THREADS) else "server other"
    return "other"


def per_query(doc: dict, run: str) -> dict[str, dict[str, float]]:
    v = doc["variants"][run]
    probe = v["probe"]
    queries = v["measured"]["QPS"] * probe["window_s"]
    out: dict[str, dict[str, float]] = {}
    for name in ("client", "server query", "server other"):
        ts = [t for t in probe["threads"] if side(t) == name]
        run_s = sum(t["run_s"] for t in ts)
        vol = sum(t["voluntary"] for t in ts)
        inv = sum(t["involuntary"] for t in ts)
        slices = sum(t["timeslices"] for t in ts)
        out[name] = {
            "threads": len(ts),
            "CPU ms/query": run_s / queries * 1e3,
            "voluntary/query": vol / queries,
            "involuntary/query": inv / queries,
            "burst ms": run_s / vol * 1e3 if vol else float("nan"),
            "slice ms": run_s / slices * 1e3 if slices else float("nan"),
        }
    out["run"] = {
        "QPS": v["measured"]["QPS"],
        "stress share": v["measured"].get("batch CPU (share)") or 0.0,
        "others share": v["measured"].get("others CPU (share)") or 0.0,
    }
    return out


def main(dirs: list[str]) -> None:
    rows: dict[tuple[str, str, str], list[float]] = {}
    for d in dirs:
        doc = json.loads((Path(d) / "comparison.json").read_text())
        for run in doc["variants"]:
            if "probe" not in doc["variants"][run]:
                continue
            for who, figs in per_query(doc, run).items():
                for k, x in figs.items():
                    rows.setdefault((run, who, k), []).append(x)
    print(f"{len(dirs)} repetitions; median [min-max]")
    print("| run | side | figure | median | min | max |")
    print("|---|---|---|---:|---:|---:|")
    for (run, who, k), xs in rows.items():
        print(f"| {run} | {who} | {k} | {statistics.median(xs):.3g} | {min(xs):.3g} | {max(xs):.3g} |")


if __name__ == "__main__":
    main(sys.argv[1:])
