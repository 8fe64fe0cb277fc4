"""Tuning speed benchmark: trials per minute of experiments/tune_koordinator.toml.

    python experiments/bench_tune.py [--trials N] [--repeat R] [--jobs 1 2]

Each repeat is a fresh study (its own SQLite file) of N trials, run through the command users
run (`colosim tune ... --jobs J`, process start and the solo runs included); prints the
median trials per minute per --jobs value and their ratio. One trial of the experiment is
2 seeds × 30 simulated seconds of a 48-CPU node. The machine is shared and noisy: compare
ratios within one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one_study(trials: int, jobs: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "sim",
            "tune",
            str(HERE / "tune_koordinator.toml"),
            "--trials",
            str(trials),
            "--jobs",
            str(jobs),
            "--out",
            tmp,
            "--no-progress",
        ]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    rates = {}
    for jobs in args.jobs:
        walls = [one_study(args.trials, jobs) for _ in range(args.repeat)]
        wall = statistics.median(walls)
        rates[jobs] = args.trials / wall * 60
        print(f"--jobs {jobs}: {args.trials} trials in {wall:.1f} s (median of {args.repeat}) = {rates[jobs]:.0f} trials/min")
    if len(rates) > 1:
        base = rates[args.jobs[0]]
        for jobs in args.jobs[1:]:
            print(f"--jobs {jobs} / --jobs {args.jobs[0]}: {rates[jobs] / base:.2f}x")


if __name__ == "__main__":
    main()
