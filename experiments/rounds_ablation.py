"""ClickHouse's calibration, piece by piece, against one fidelity suite's host runs
(docs/replay.md, "The server's rounds"): `colosim fidelity --repredict` on copies of a suite's
fidelity.json (ClickHouse only) that undo one piece each —

    fanout 1,      server rounds      today's calibration
    fanout ncpus,  generator rounds   before: one thread per CPU, the generator's switches
    fanout 1,      generator rounds   the measured fanout alone
    fanout ncpus,  server rounds      the server's switches alone

    python experiments/rounds_ablation.py out/fidelity/fidelity.json [--out out/rounds_ablation]

Nothing runs on the host: every variant is calibrated and predicted from the same kept alone
runs and scored against the same host runs.
"""

from __future__ import annotations

import copy

from repredict import repredict, suite_from_command_line

from replay.workloads import REPO

VARIANTS = (
    ("fanout 1, server rounds (now)", False, True),
    ("fanout ncpus, generator rounds (before)", True, False),
    ("fanout 1, generator rounds", False, False),
    ("fanout ncpus, server rounds", True, True),
)


def main() -> int:
    src, out = suite_from_command_line(__doc__.splitlines()[0], "out/rounds_ablation")
    scenario = (REPO / "experiments/fidelity/clickhouse.toml").read_text()
    ncpus = out / "clickhouse_ncpus.toml"
    ncpus.write_text(scenario.replace("\nfanout = 1\n", '\nfanout = "ncpus"\n'))
    print("| calibration | rounds | stress case: QPS, stress's share (host / sim) | median abs error QPS / P50 / P99 (4 cases) |")
    print("|---|---:|---|---|")
    for k, (name, spread, server) in enumerate(VARIANTS):
        doc = copy.deepcopy(src)
        doc["services"] = {"clickhouse": doc["services"]["clickhouse"]}
        svc = doc["services"]["clickhouse"]
        if spread:
            svc["scenario"] = str(ncpus.resolve())
        if not server:
            svc["alone_measured"]["services"]["clickhouse"]["server_switches"] = None
        got = repredict(doc, out, k)
        s = got["services"]["clickhouse"]
        rounds = s["calibration"][str(got["config"]["seed"])]["clickhouse rounds"]
        st = s["scores"]["stress"]
        o = got["overall"]

        def pair(m: str, st: dict = st) -> str:
            return f"{st[m]['host']['mean']:.3g} / {st[m]['sim']['mean']:.3g}"

        errors = " / ".join(f"{o[f'median |error| {m}'] * 100:.1f}%" for m in ("QPS", "P50 (s)", "P99 (s)"))
        print(f"| {name} | {rounds:.0f} | {pair('QPS')}, {pair('offline CPU (share)')} | {errors} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
