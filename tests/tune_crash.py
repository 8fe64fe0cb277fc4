"""A trial job that kills its own process for the defaults (threshold 65): a stand-in for a
simulation that dies instead of raising.  Importable by the tuner's worker processes."""

import os

from sim.tuning.study import Job, measure


def crash_on_defaults(job: Job):
    if job.overrides["policy"].get("cpu_suppress_threshold_percent") == 65:
        os._exit(3)
    return os.getpid(), measure(job.document, job.overrides, job.seeds, job.cases, job.batch)
