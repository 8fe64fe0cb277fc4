"""`colosim run SCENARIO.toml`: run a scenario, print the table, write results and a report.

A user error (a ColosimError: a bad scenario, a bad --set, a missing file, a value the core
refuses, a host replay cannot use; or an OSError on the user's files) is one line on stderr,
`colosim: error: <message>`, and exit status 2; never a traceback.  Set COLOSIM_DEBUG=1 to get
the traceback anyway.  Any other exception is a bug in colosim: it is said so, with where to
report it and the traceback, and exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sim.environment import CoreNotBuilt
from sim.errors import ColosimError, ScenarioError

if TYPE_CHECKING:
    from sim.results import ExperimentResult
    from sim.scenario import Scenario

USAGE_ERROR = 2
BUG = 1
REPORT_TO = "the colosim repository's issue tracker"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="colosim",
        description="Discrete-event simulation of online/offline colocation on one Linux node.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run a scenario file",
        description="Run every [[runs]] entry of a scenario and compare them with the baseline.",
    )
    run.add_argument("scenario", metavar="SCENARIO.toml", type=Path)
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field in every run; KEY is a dotted path (quote segments that "
        'contain dots: cgroups.offline."cpu.qos_level"=-1), VALUE a TOML value or a string',
    )
    run.add_argument("--seed", type=int, help="seed for every run (default: scenario.seed)")
    run.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run everything with N seeds (--seed, --seed+1, ...): each figure's median and range over them, and "
        "whether the batch starves in some seeds and not in others (default 1)",
    )
    run.add_argument("--out", type=Path, help="output directory (default: out/<scenario name>)")
    run.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="run every run under this policy: a [policy] TOML (colosim tune's tuned_policy.toml), a Koordinator NodeSLO "
        "or slo-controller-config ConfigMap (YAML), or a rubik config.json",
    )
    run.add_argument(
        "--trace", type=Path, metavar="TRACE.parquet", help="the trace the scenario's trace-driven workloads play (their trace.file)"
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    rep = commands.add_parser(
        "replay",
        help="run a scenario on this host's real cgroups (root)",
        description="Run every [[runs]] entry on this host: real cgroups beneath this process's own, "
        "real workloads, the scenario's policy; with --compare, beside the simulator's prediction.",
    )
    rep.add_argument("scenario", metavar="SCENARIO.toml", type=Path, nargs="?")
    rep.add_argument("--compare", action="store_true", help="calibrate on the online workload alone, then print measured vs predicted")
    rep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as for run")
    rep.add_argument("--seed", type=int, help="seed for every run (default: scenario.seed)")
    rep.add_argument("--policy", type=Path, metavar="FILE", help="as for run")
    rep.add_argument("--out", type=Path, help="write comparison.json and report.html here")
    rep.add_argument("--dry-run", action="store_true", help="print every knob write it would make, run nothing")
    rep.add_argument("--cleanup", action="store_true", help="remove what a crashed replay left, and exit")
    rep.add_argument(
        "--probe",
        nargs="?",
        type=float,
        const=20.0,
        metavar="HZ",
        help="sample every thread of the workloads' cgroups (default 20 Hz): run, run-queue wait, switches, migrations, CPUs",
    )
    cal = commands.add_parser(
        "calibrate",
        help="measure the core's error per mechanism on this host (root)",
        description="Short micro-scenarios (shares split, cpu.idle, quota, quota+burst, cpuset) on the host "
        "and in the simulator; prints the error of each.",
    )
    cal.add_argument("--duration", type=float, default=8.0, help="seconds per micro-scenario (default 8)")
    cal.add_argument("--out", type=Path, help="write calibration.json here")
    cal.add_argument("--seeds", type=int, default=8, help="simulator runs per micro-scenario, seeds 1..N (default 8)")
    cal.add_argument("--repeat", type=int, default=1, help="host runs per micro-scenario (default 1)")
    hk = commands.add_parser(
        "host-kernel",
        help="print this host's scheduler settings, where each was read, and the [kernel] replay predicts with",
        description="Read (never write) the kernel release, HZ, the EEVDF base slice, the sched features, the "
        "preemption mode and kernel.sched_autogroup_enabled, each with its source (debugfs, the kernel "
        "config, measured, or the release's default), and print the [kernel] table replay fills in.",
    )
    hk.add_argument("--json", action="store_true", help="print the settings and their sources as JSON")
    hk.add_argument(
        "--private-debugfs",
        action="store_true",
        help="opt-in: read debugfs where it is not mounted, from a child that mounts it in a private mount "
        "namespace (unshare -m; root); the host's mounts are not touched",
    )
    hk.add_argument(
        "--idle-exit",
        action="store_true",
        help="also measure how long a wakeup of an idle CPU waits and what a wakeup across CPUs costs its two "
        "ends (a few seconds of pinned processes writing to each other over pipes, beside and without SCHED_IDLE "
        "spinners) and print them as [node.cpuidle] and [node.remote_wakeup]",
    )
    hk.add_argument(
        "--steal",
        action="store_true",
        help="also measure what the hypervisor takes from a busy CPU (~10 s of a spinner pinned to each CPU, "
        "spinning and then in 4 ms spells) and print it as [node.steal]",
    )
    fid = commands.add_parser(
        "fidelity",
        help="score every prediction against this host: real services x isolation cases, repeated (root)",
        description="Run each service of experiments/fidelity/ (or SCENARIO.toml files) in each case on this host, "
        "repeated; calibrate each service once on its alone runs; predict every case with several seeds; print, "
        "and write OUT/fidelity.json (after every run) and OUT/fidelity.html, how far each prediction is from the host.",
    )
    fid.add_argument(
        "--services",
        default="clickhouse,nginx,redis,postgres",
        help="comma-separated: names in experiments/fidelity/ or paths to scenario files (default: clickhouse,nginx,redis,postgres)",
    )
    fid.add_argument("--cases", help="comma-separated [[runs]] names (default: every case; the alone case always runs)")
    fid.add_argument("--reps", type=int, default=3, help="host repetitions of each case (default 3)")
    fid.add_argument("--duration", type=float, help="seconds per run, warm-up included (default: the scenario's)")
    fid.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="simulator seeds per case (default 3; with --repredict: the suite's own unless given — more seeds "
        "judge a model change with less of the model's own seed-to-seed spread)",
    )
    fid.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    fid.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="as for run, in every service (with --repredict: added to the suite's own)",
    )
    fid.add_argument("--out", type=Path, default=Path("out/fidelity"), help="output directory (default out/fidelity)")
    again = fid.add_mutually_exclusive_group()
    again.add_argument(
        "--rescore", type=Path, metavar="FIDELITY.json", help="score a finished suite's fidelity.json again into --out; run nothing"
    )
    again.add_argument(
        "--repredict",
        type=Path,
        metavar="FIDELITY.json",
        help="calibrate and predict again with this code from the host measurements a finished suite kept, then score, "
        "into --out (no host run: a model change judged against the same host runs)",
    )
    rec = commands.add_parser(
        "record",
        help="sample real cgroups' CPU and memory into a trace file (read-only on the host)",
        description="Sample cgroups' CPU usage (cores) and memory (bytes) every interval into the trace format.",
    )
    rec.add_argument(
        "--cgroup",
        action="append",
        required=True,
        metavar="PATH[=ROLE]",
        help='a cgroup path as /proc/PID/cgroup shows it, e.g. "/kubepods/pod-x=online"; repeatable',
    )
    rec.add_argument("--interval", default="1s", help="sampling interval (default 1s)")
    rec.add_argument("--duration", required=True, help='how long, e.g. "10m"')
    rec.add_argument("-o", "--output", required=True, type=Path, metavar="TRACE.parquet", help="output file (.parquet or .csv)")
    tr = commands.add_parser(
        "trace",
        help="make a trace file: from Alibaba cluster-trace-v2018, or synthetic",
        description="Write a trace in colosim's format (see docs/traces.md).",
    )
    tr.add_argument("source", choices=("alibaba2018", "google2019", "synthetic"))
    tr.add_argument("directory", nargs="?", type=Path, help="alibaba2018/google2019: where the dataset's CSVs are")
    tr.add_argument("--node-cores", type=float, default=64, help="google2019: cores of the simulated node (capacity.cpus = this)")
    tr.add_argument("--machine", help="alibaba2018: the machine id, e.g. m_1940")
    tr.add_argument(
        "--machines",
        metavar="M1,M2,...|N",
        help="alibaba2018: a fleet, one trace per machine into --out DIR (with index.json): the machines named, or the N busiest",
    )
    tr.add_argument("--out", type=Path, metavar="DIR", help="alibaba2018 --machines: the directory of the fleet's traces")
    tr.add_argument("--start", default="0s", help="window start (trace time), e.g. 86400s")
    tr.add_argument("--end", default="1d", help="window end; synthetic: the length (default 1d)")
    tr.add_argument("--step", default="60s", help="sample step (default 60s)")
    tr.add_argument("--node-memory", default="64Gi", help="alibaba2018: memory of the node (normalised memory 100 = this)")
    tr.add_argument("--seed", type=int, default=1, help="synthetic: seed")
    tr.add_argument("-o", "--output", type=Path, metavar="TRACE.parquet", help="the trace file (not with --machines)")
    sh = commands.add_parser(
        "shape",
        help="measure a real service's request shape on this host and write its workload section (root)",
        description="Start PROGRAM in a cgroup beneath this process's own, drive it with its load generator, sample "
        "every thread's schedstat and switch counts, and write the closed_loop [workloads.NAME] section "
        "(fanout, service, shape.bursts, shape.wait) with the raw figures (see docs/replay.md).",
    )
    sh.add_argument(
        "program",
        metavar="PROGRAM",
        help="clickhouse (+ clickhouse-benchmark), nginx (+ wrk), redis (+ redis-benchmark), postgres (+ pgbench -S), or command (--command, + wrk)",
    )
    sh.add_argument(
        "--command", dest="server_command", metavar="ARGV", help='program command: the HTTP server to run, "{port}" where its port goes'
    )
    sh.add_argument(
        "--clients", default="1", metavar="C[,C...]", help="clients of each pass (default 1); the section is written from the fewest"
    )
    sh.add_argument("--duration", default="10s", help="seconds per pass (default 10s)")
    sh.add_argument("--warmup", default="2s", help="a pass thrown away first (default 2s)")
    sh.add_argument("--idle", default="2s", help="the idle server watched for this long, its own activity subtracted (default 2s)")
    sh.add_argument("--interval", default="2ms", help="how often every thread's run time is read (default 2ms)")
    sh.add_argument("--repeat", type=int, default=1, help="passes per clients value (default 1)")
    sh.add_argument(
        "--no-cross-cpu",
        dest="cross_cpu",
        action="store_false",
        help="skip the passes on one CPU that measure what an exchange across CPUs costs (cross_cpu)",
    )
    sh.add_argument("--name", default="web", help="the workload's name in the section (default web)")
    sh.add_argument("--query", help="clickhouse: the query (default: the seed experiment's)")
    sh.add_argument("--path", default="/", help="nginx, command: the URL path (default /)")
    sh.add_argument("--out", type=Path, help="write shape.toml and shape.json here (default out/shape-PROGRAM)")
    from sim.tuning.command import add_parser

    add_parser(commands)
    return parser


def _set_values_attached(argv: Sequence[str]) -> list[str]:
    """`--set VALUE` as `--set=VALUE`: a KEY=VALUE is the user's text, and argparse would take
    one that starts with "-" (`--set -x=1`) for an option and stop with its usage instead of
    letting the override's own check name what is wrong."""
    out: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--set":
            value = next(it, None)
            out.append(a if value is None else f"--set={value}")
        else:
            out.append(a)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(_set_values_attached(sys.argv[1:] if argv is None else argv))
    try:
        return _run(args, argv)
    except KeyboardInterrupt:
        print("colosim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `colosim run ... | head`: the reader left; nothing to say
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit flush cannot fail
        return 1
    except CoreNotBuilt as err:  # an installation problem, not the user's input
        print(f"colosim: error: {err}", file=sys.stderr)
        return 1
    except (ColosimError, OSError) as err:
        if os.environ.get("COLOSIM_DEBUG"):
            raise
        print(f"colosim: error: {_one_line(err)}", file=sys.stderr)
        return USAGE_ERROR
    except Exception as err:  # noqa: BLE001 - anything else is ours, and said to be
        print(
            f"colosim: internal error (a bug in colosim, not in your input; please report it at {REPORT_TO} "
            f"with the command and the traceback below): {type(err).__name__}: {_one_line(err)}",
            file=sys.stderr,
        )
        traceback.print_exc()
        return BUG


def _run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    if args.command == "replay":
        return _replay(args)
    if args.command == "record":
        return _record(args)
    if args.command == "trace":
        return _trace(args)
    if args.command == "tune":
        from sim.tuning.command import tune

        return tune(args)
    if args.command == "shape":
        return _shape(args)
    if args.command == "fidelity":
        return _fidelity(args, argv)
    if args.command == "host-kernel":
        return _host_kernel(args)
    if args.command == "calibrate":
        from replay.calibrate import calibrate

        for flag, value in (("--seeds", args.seeds), ("--repeat", args.repeat)):
            if value < 1:
                raise ScenarioError(f"{flag}: must be at least 1 (got {value})")
        return calibrate(args.duration, args.out, seeds=args.seeds, repeat=args.repeat)
    # Imported here so `colosim --help` and argument errors stay fast.
    from sim.report import write_report
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    scenario = load_scenario(args.scenario, _overrides(args))
    if args.seed is not None and not 0 <= args.seed < 2**64:
        raise ScenarioError(f"--seed: must be in 0..2^64-1 (got {args.seed})")
    if args.seeds < 1:
        raise ScenarioError(f"--seeds: must be at least 1 (got {args.seeds})")
    first = scenario.seed if args.seed is None else args.seed
    if first + args.seeds > 2**64:
        raise ScenarioError(f"--seeds: seeds {first}..{first + args.seeds - 1} pass 2^64-1")
    out = args.out if args.out is not None else Path("out") / scenario.name
    out.mkdir(parents=True, exist_ok=True)
    result = run_scenario(scenario, seed=first, progress=not args.no_progress)
    results_path = out / "results.json"
    results_path.write_text(result.to_json() + "\n", encoding="utf-8")
    report_path = write_report(result, out / "report.html")
    print(result)
    if args.seeds == 1:
        print(f"\nwrote {results_path} and {report_path}")
        return 0
    return _more_seeds(args, scenario, result, out, results_path, report_path)


def _more_seeds(
    args: argparse.Namespace, scenario: Scenario, result: ExperimentResult, out: Path, results_path: Path, report_path: Path
) -> int:
    """`run --seeds N`: the seeds after the first, each written as it finishes
    (OUT/seed-K/results.json), then the summary over all of them (OUT/seeds.json)."""
    import json

    from sim.results import finite
    from sim.runner import run_scenario
    from sim.seeds import claims, run_figures, summarize

    seeds = [result.seed + k for k in range(args.seeds)]
    per_seed = [run_figures(result, scenario)]
    for seed in seeds[1:]:
        more = run_scenario(scenario, seed=seed, progress=not args.no_progress)
        (out / f"seed-{seed}").mkdir(exist_ok=True)
        (out / f"seed-{seed}" / "results.json").write_text(more.to_json() + "\n", encoding="utf-8")
        per_seed.append(run_figures(more, scenario))
    summary = summarize(seeds, per_seed, claims(result, scenario))
    seeds_path = out / "seeds.json"
    seeds_path.write_text(json.dumps(finite(summary.to_dict()), indent=2) + "\n", encoding="utf-8")
    print(f"\n{summary}")
    print(f"\nwrote {results_path} and {report_path} (seed {seeds[0]}), {out}/seed-K/results.json (the others) and {seeds_path}")
    return 0


def _host_kernel(args: argparse.Namespace) -> int:
    import json

    from replay.host_kernel import host_kernel, host_kernel_report, read_in_private_debugfs

    hk = read_in_private_debugfs() if args.private_debugfs else host_kernel()
    if args.steal:
        from replay import steal

        s = steal.measure()
        if args.json:
            print(json.dumps({**hk.as_dict(), "steal": s.to_dict()}, indent=2))
        else:
            print(f"{host_kernel_report(hk)}\n\n# {s.summary()}\n{s.toml()}")
        return 0
    if args.idle_exit:
        from replay import cpuidle, remote_wakeup

        m = cpuidle.measure()
        w = remote_wakeup.measure()
        if args.json:
            print(json.dumps({**hk.as_dict(), "cpuidle": m.to_dict(), "remote_wakeup": w.to_dict()}, indent=2))
        else:
            print(f"{host_kernel_report(hk)}\n\n# {m.summary()}\n{m.toml()}\n# {w.summary()}\n{w.toml()}")
        return 0
    print(json.dumps(hk.as_dict(), indent=2) if args.json else host_kernel_report(hk))
    return 0


def _replay(args: argparse.Namespace) -> int:
    from replay.compare import cleanup, replay

    if args.cleanup:
        return cleanup()
    if args.scenario is None:
        raise ScenarioError("replay: give a SCENARIO.toml (or --cleanup)")
    if args.seed is not None and not 0 <= args.seed < 2**64:
        raise ScenarioError(f"--seed: must be in 0..2^64-1 (got {args.seed})")
    if args.probe is not None and not 0 < args.probe <= 1000:
        raise ScenarioError(f"--probe: the sampling rate must be in (0, 1000] Hz (got {args.probe:g})")
    return replay(args.scenario, _overrides(args), args.seed, args.out, args.compare, args.dry_run, probe_hz=args.probe)


def _shape(args: argparse.Namespace) -> int:
    import shlex

    from replay.shape import ShapeRequest, shape_command

    try:
        clients = [int(c) for c in args.clients.split(",")]
    except ValueError:
        raise ScenarioError(f"--clients: integers separated by commas (got {args.clients!r})") from None
    try:
        command = shlex.split(args.server_command) if args.server_command is not None else None
    except ValueError as err:
        raise ScenarioError(f"--command: {err}") from None
    request = ShapeRequest(
        program=args.program,
        clients=clients,
        duration_s=_seconds("duration", args.duration),
        warmup_s=_seconds("warmup", args.warmup),
        idle_s=_seconds("idle", args.idle),
        interval_s=_seconds("interval", args.interval),
        repeat=args.repeat,
        cross_cpu=args.cross_cpu,
        name=args.name,
        query=args.query,
        path=args.path,
        command=command,
    )
    request.check()
    return shape_command(request, args.out if args.out is not None else Path("out") / f"shape-{args.program}")


def _fidelity(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from replay.fidelity import command_line, fidelity, rescore

    if args.rescore is not None:
        if args.seeds is not None:
            raise ScenarioError("--seeds: --rescore predicts nothing (use --repredict)")
        return rescore(args.rescore, args.out, overrides=args.overrides)
    if args.repredict is not None:
        return rescore(args.repredict, args.out, repredict=True, overrides=args.overrides, seeds=args.seeds)
    if args.seeds is None:
        args.seeds = 3
    if not 0 <= args.seed < 2**64:
        raise ScenarioError(f"--seed: must be in 0..2^64-1 (got {args.seed})")
    services = [s.strip() for s in args.services.split(",") if s.strip()]
    if not services:
        raise ScenarioError("--services: name at least one service")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None
    if cases is not None and not cases:
        raise ScenarioError("--cases: name at least one case")
    line = command_line(list(argv if argv is not None else sys.argv[1:]))
    return fidelity(services, cases, args.reps, args.duration, args.seeds, args.seed, args.out, args.overrides, line)


def _seconds(flag: str, text: str) -> float:
    """A command-line duration in seconds; trace windows may also be given in days ("1d")."""
    from sim.duration import parse_duration

    if text.endswith("d") and text[:-1].replace(".", "", 1).isdigit():
        return float(text[:-1]) * 86_400
    try:
        return parse_duration(text) / 1e9
    except ValueError as err:
        raise ScenarioError(f"--{flag}: {err}") from None


def _write_trace(trace, output: Path) -> int:
    trace.write(output)
    for e in trace.entities.values():
        print(f"{e.name} ({e.role}): {len(e)} samples, mean {e.cpu_cores.mean():.2f} cores, max {e.cpu_cores.max():.2f}")
    print(f"wrote {output}")
    return 0


def _trace(args: argparse.Namespace) -> int:
    from policies.pods import memory_bytes

    start, end, step = _seconds("start", args.start), _seconds("end", args.end), _seconds("step", args.step)
    if args.machines is not None or args.out is not None:
        return _fleet(args, start, end, step)
    if args.output is None:
        raise ScenarioError(f"trace {args.source}: give -o TRACE.parquet")
    if args.source in ("alibaba2018", "google2019"):
        from traces import alibaba2018, google2019

        if args.directory is None or not args.machine:
            raise ScenarioError(f"trace {args.source}: give the dataset's DIRECTORY and --machine")
        try:
            mem = memory_bytes(args.node_memory)
        except ValueError as err:
            raise ScenarioError(f"--node-memory: {err}") from None
        if args.source == "alibaba2018":
            trace = alibaba2018.load(args.directory, args.machine, start, end, step, mem)
        else:
            trace = google2019.load(args.directory, args.machine, start, end, args.node_cores, mem)
    else:
        from traces import synthetic

        trace = synthetic.day(args.seed, duration_s=end, step_s=step)
    return _write_trace(trace, args.output)


def _fleet(args: argparse.Namespace, start: float, end: float, step: float) -> int:
    """`colosim trace alibaba2018 DIR --machines ... --out DIR`: one trace per machine."""
    from policies.pods import memory_bytes
    from traces import fleet

    if args.source != "alibaba2018":
        raise ScenarioError(f"trace {args.source}: --machines and --out are for alibaba2018 (a fleet from its machine_usage)")
    if args.machines is None or args.out is None:
        raise ScenarioError("trace alibaba2018: a fleet needs both --machines M1,M2,...|N and --out DIR")
    if args.directory is None:
        raise ScenarioError("trace alibaba2018: give the dataset's DIRECTORY")
    if args.machine or args.output is not None:
        raise ScenarioError("trace alibaba2018: --machines writes into --out DIR; leave out --machine and -o")
    text = args.machines.strip()
    machines: list[str] | int
    if text.isdigit():
        machines = int(text)
    else:
        machines = [m.strip() for m in text.split(",") if m.strip()]
        if not machines:
            raise ScenarioError("--machines: machine ids separated by commas, or a count (got an empty list)")
    try:
        mem = memory_bytes(args.node_memory)
    except ValueError as err:
        raise ScenarioError(f"--node-memory: {err}") from None
    rows = fleet.split(args.directory, machines, args.out, start, end, step, mem)
    for r in rows:
        print(
            f"{r['machine']}: {r['readings']} readings, {r['samples']} samples, mean {r['mean_cpu_cores']:.2f} cores, max {r['max_cpu_cores']:.2f}"
        )
    print(f"wrote {len(rows)} traces and {args.out / fleet.INDEX}")
    return 0


def _record(args: argparse.Namespace) -> int:
    from traces.recorder import mounts, record, source

    interval, duration = _seconds("interval", args.interval), _seconds("duration", args.duration)
    if args.output.suffix not in (".parquet", ".csv"):
        raise ScenarioError(f"-o {args.output}: a trace file ends in .parquet or .csv")
    m = mounts()
    sources = [source(spec, m) for spec in args.cgroup]
    return _write_trace(record(sources, interval, duration), args.output)


def _overrides(args: argparse.Namespace) -> dict:
    """--policy FILE and --trace FILE, then every --set (which wins)."""
    from sim.overrides import combine
    from sim.scenario import policy_file, read_document, trace_overrides

    trace = getattr(args, "trace", None)
    traced = trace_overrides(read_document(args.scenario), trace) if trace else {}
    return combine(policy_file(args.policy) if args.policy else {}, traced, args.overrides)


def _one_line(err: BaseException) -> str:
    if isinstance(err, KeyError) and err.args:
        message = str(err.args[0])  # str(KeyError) would add quotes
    elif isinstance(err, OSError) and err.strerror:
        message = f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    else:
        message = str(err) or type(err).__name__
    return " ".join(message.split())
