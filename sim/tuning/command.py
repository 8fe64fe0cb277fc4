"""`colosim tune SCENARIO.toml ...`: set up (everything checked before the first trial), run
the study to its number of trials, print and write what it found."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.errors import ScenarioError
from sim.overrides import combine


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tune = commands.add_parser(
        "tune",
        help="search a policy's thresholds with Optuna",
        description="An Optuna study over a policy's parameters: maximize batch throughput (or utilization) "
        "subject to SLOs, or trade throughput against latency (several objectives: the Pareto set). "
        "Options left out come from the scenario's [tune] table.",
    )
    tune.add_argument("scenario", metavar="SCENARIO.toml", type=Path)
    tune.add_argument("--policy", help="policy to tune (default: [tune] policy, else the scenario's [policy])")
    tune.add_argument(
        "--trials",
        type=int,
        help="trials the study holds when done, over all workers (default: [tune] trials, 100); "
        "running the same command again resumes a killed study (the trials it left running fail as orphaned and do not count)",
    )
    tune.add_argument("--slo", action="append", metavar="EXPR", help='e.g. "online.p99 <= 0.9s", "online.p99 <= 1.1 * solo"; repeatable')
    tune.add_argument(
        "--objective",
        action="append",
        metavar="METRIC",
        help="batch_cpu (default), utilization, or SERVICE.p99 ...; give two (e.g. batch_cpu and online.p99) for a multi-objective study",
    )
    tune.add_argument(
        "--param",
        action="append",
        metavar="NAME[=LOW:HIGH]",
        help="a parameter to search (default: the policy's usual thresholds); repeatable",
    )
    tune.add_argument(
        "--trace",
        action="append",
        metavar="TRACE.parquet",
        help="a trace the trace-driven workloads play; repeat for a trace set: every trial runs each, the SLO holds on the worst",
    )
    tune.add_argument(
        "--trace-set",
        type=Path,
        metavar="DIR",
        help="every trace file in DIR (sorted; each named by its file, e.g. a machine of `colosim trace alibaba2018 --machines`): "
        "every trial runs each, the SLO holds on the worst machine, results per machine",
    )
    tune.add_argument(
        "--fidelity",
        choices=("full", "window"),
        help="window: each trial first runs every trace's busiest window; the pruner (successive halving) sends "
        "the most promising third on to the whole traces (default: [tune] fidelity, full)",
    )
    tune.add_argument("--window", help='--fidelity window: the window, in trace time (default: [tune] window, "1h")')
    tune.add_argument("--seeds", type=int, help="seeds per trial: objectives are their mean, SLOs hold on the worst (default 1)")
    tune.add_argument(
        "--storage",
        help="Optuna storage URL, e.g. postgresql://user@host/db to share one study between machines (default: sqlite file OUT/tune.db)",
    )
    tune.add_argument("--study", help="study name (default: SCENARIO:POLICY)")
    tune.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="trials at once, each in its own process on this machine, or spread over --cluster's workers (default 1)",
    )
    tune.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run each trial's simulations (one task per seed x case x trace) on a Dask distributed cluster, "
        "e.g. tcp://HOST:8786 (`dask scheduler`, `dask worker ADDRESS`); the study stays in --storage",
    )
    tune.add_argument("--sampler", choices=("tpe", "nsga2", "random"), help="default tpe")
    tune.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as for run")
    tune.add_argument("--out", type=Path, help="output directory (default: out/<scenario name>)")
    tune.add_argument(
        "--validate",
        action="store_true",
        help="then replay the best and the default configuration on this host (root) and print predicted vs measured",
    )
    tune.add_argument("--no-progress", action="store_true", help="no progress bar")


def tune(args: argparse.Namespace) -> int:
    from sim.tuning.output import best_trial, defaults_trial, summary_text, write_outputs
    from sim.tuning.spec import build_spec
    from sim.tuning.study import open_study, optimize, storage_url

    if args.jobs < 1:
        raise ScenarioError(f"--jobs: must be >= 1 (got {args.jobs})")
    traces = args.trace
    if args.trace_set is not None:
        from traces.fleet import trace_set

        if traces:
            raise ScenarioError("--trace-set: give a trace set as --trace-set DIR or as --trace FILE ..., not both")
        traces = trace_set(args.trace_set)
    spec = build_spec(
        args.scenario,
        combine(args.overrides),
        policy=args.policy,
        params=args.param,
        slo=args.slo,
        objective=args.objective,
        trials=args.trials,
        seeds=args.seeds,
        sampler=args.sampler,
        traces=traces,
        fidelity=args.fidelity,
        window=args.window,
    )
    out = args.out if args.out is not None else Path("out") / spec.scenario.name
    name = args.study or f"{spec.scenario.name}:{spec.policy}"
    runner = None
    if args.cluster:  # an address that answers no scheduler is said before any trial
        from sim.tuning.cluster import Cluster

        runner = Cluster(args.cluster)
    try:
        study = open_study(spec, storage_url(spec, args.storage, out), name)
    except BaseException:
        if runner is not None:
            runner.close()
        raise
    optimize(spec, study, args.jobs, progress=not args.no_progress, runner=runner)
    print(summary_text(spec, study, name))
    written = write_outputs(spec, study, name, out)
    print("\nwrote " + " and ".join(str(p) for p in written))
    if args.validate:
        from sim.tuning.validate import validate

        best = best_trial(spec, study) if not spec.multi else None
        return validate(spec, defaults_trial(study), best, out / "validate")
    return 0
