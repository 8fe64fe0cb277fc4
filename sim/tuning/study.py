"""The Optuna study: storage, resume, the ask/tell loop, trials in worker processes.

The sampler lives in this process and asks; each trial's simulation runs in a process of its
own (`--jobs J` at once) and only its measurement comes back; this process tells the study.
So the storage is written from one place per machine, a trial that crashes its process costs
that trial only, and many machines share one study through an RDB URL: each runs the same
command and they stop together when the study holds `trials` trials.

A trial that raises (a policy configuration the agent refuses, a simulation error) is told
as FAILED with its reason in the user attribute `error`, and the study goes on.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sim.errors import ScenarioError
from sim.results import finite
from sim.tuning.evaluate import Measurement, measure
from sim.tuning.outcome import Outcome, summarize
from sim.tuning.space import policy_table
from sim.tuning.spec import TuneSpec

if TYPE_CHECKING:
    from optuna import Study, Trial
    from optuna.distributions import BaseDistribution
    from optuna.samplers import BaseSampler

WORKER = f"{socket.gethostname()}:{os.getpid()}"
CREATE_ATTEMPTS = 5


@dataclass(frozen=True)
class Job:
    """Everything a trial's process needs: plain data, so it pickles."""

    document: dict[str, Any]
    overrides: dict[str, Any]
    seeds: list[int]
    cases: list[str]
    batch: list[str]
    traces: list[str]


def run_job(job: Job) -> Ran:
    """The trial's simulations; returns the pid that ran them with what they measured."""
    return os.getpid(), measure(job.document, job.overrides, job.seeds, job.cases, job.batch, job.traces)


def storage_url(spec: TuneSpec, storage: str | None, out: Path) -> str:
    """The storage URL; the default is an SQLite file beside the results, so running the same
    command again resumes the study."""
    if storage:
        return storage
    out.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(out / 'tune.db').resolve()}"


def make_sampler(spec: TuneSpec) -> BaseSampler:
    import optuna

    seed = spec.scenario.seed % 2**32
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if spec.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(50, spec.trials // 5)))
    # TPE handles constraints (Trial.set_constraint) and several objectives; a short random
    # start, so a study of a few dozen trials still spends most of them modelled.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=max(4, min(10, spec.trials // 5)))


def open_study(spec: TuneSpec, url: str, name: str) -> Study:
    """Create the study, or load it if it exists — then it must be the same study."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for attempt in range(CREATE_ATTEMPTS):
        try:
            study = optuna.create_study(
                storage=url,
                study_name=name,
                load_if_exists=True,
                directions=spec.directions,
                sampler=make_sampler(spec),
            )
            break
        except ValueError as err:  # e.g. the directions differ from the stored study's
            raise ScenarioError(f"--study {name}: {err}") from None
        except ImportError as err:
            raise ScenarioError(f"--storage {url}: {err}") from None
        except Exception as err:  # noqa: BLE001
            # Workers started together on an empty database race to create Optuna's tables
            # (RDBStorage creates them without a lock): the loser sees a duplicate table or
            # type; by the next attempt they exist.
            if attempt == CREATE_ATTEMPTS - 1 or type(err).__module__.split(".")[0] != "sqlalchemy":
                raise ScenarioError(f"--storage {url}: {' '.join(str(err).split())[:300]}") from None
            time.sleep(0.2 * (attempt + 1))
    mine = spec.identity()
    stored = study.user_attrs.get("spec")
    if stored is None:
        study.set_user_attr("spec", mine)
    elif stored != mine:
        diff = ", ".join(k for k in mine if stored.get(k) != mine[k])
        raise ScenarioError(
            f"--study {name}: this study in {url} was set up differently ({diff}); resume it with the same scenario and options, or give a new --study"
        )
    return study


def fail_stale(study: Study) -> int:
    """Trials left RUNNING by a process of this machine that is gone (a killed study) are
    marked FAILED, so that resuming does not wait for them."""
    import optuna

    host = socket.gethostname()
    n = 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        who = str(t.user_attrs.get("worker", ""))
        h, _, pid = who.rpartition(":")
        if h == host and pid.isdigit() and not _alive(int(pid)):
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
            n += 1
    return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def solo_measurement(spec: TuneSpec) -> Measurement:
    """Each case with every batch workload disabled and the scenario's own policy: the
    service alone, which `solo` in an SLO refers to."""
    off = {f"workloads.{b}.enabled": False for b in spec.batch}
    return measure(spec.document, {**spec.overrides, **off}, spec.seeds, spec.cases, spec.batch, spec.traces)


_P = ParamSpec("_P")
_T = TypeVar("_T")
# what a trial's process hands back: its pid and the measurement
Ran = tuple[int, Measurement]


class _Inline(cf.Executor):
    """--jobs 1: the trial runs here (same code path, no process)."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> cf.Future[_T]:
        f: cf.Future[_T] = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - handed back like a pool would
            if isinstance(err, KeyboardInterrupt):
                raise
            f.set_exception(err)
        return f


def _pool(jobs: int) -> cf.Executor:
    if jobs == 1:
        return _Inline()
    # forkserver with the simulator preloaded: a fresh process per trial costs a fork, not
    # an interpreter start; nothing of this process (storage connections, threads) is inherited.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["sim.tuning.study", "sim.runner", "policies", "sim._core"])
    return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1)


class _Workers:
    """The executor, renewed when a trial's process died (a dead worker breaks a process
    pool for good: the trials it was running fail with "the trial's process died", later
    ones get a fresh pool)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool = _pool(jobs)

    def submit(self, fn: Callable[[Job], Ran], job: Job) -> cf.Future[Ran]:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.pool.submit(fn, job)
        except BrokenProcessPool:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = _pool(self.jobs)
            return self.pool.submit(fn, job)

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def tell(study: Study, trial: Trial, spec: TuneSpec, solo: Measurement, future: cf.Future[Ran]) -> Outcome | None:
    import optuna

    try:
        pid, measured = future.result()
    except Exception as err:  # noqa: BLE001 - the reason is recorded, the study goes on
        reason = _reason(err)
        trial.set_user_attr("error", reason)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return None
    outcome = summarize(measured, solo, spec.objectives, spec.slos, spec.metrics)
    trial.set_user_attr("ran_in", pid)
    trial.set_user_attr("summary", finite(outcome.summary))
    for text, v in outcome.constraints.items():
        trial.set_constraint(text, v)
    if any(math.isnan(v) for v in outcome.values):
        bad = ", ".join(o.text for o, v in zip(spec.objectives, outcome.values, strict=True) if math.isnan(v))
        trial.set_user_attr("error", f"objective not measurable: {bad} (a service completed no request)")
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return None
    study.tell(trial, outcome.values if spec.multi else outcome.values[0])
    return outcome


def _reason(err: BaseException) -> str:
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(err, BrokenProcessPool):
        return "the trial's process died"
    if isinstance(err, KeyError) and err.args:
        return str(err.args[0])
    if isinstance(err, ValueError):  # ScenarioError, PolicyError, the core's refusals
        return " ".join(str(err).split())
    return f"{type(err).__name__}: {err}"


def optimize(spec: TuneSpec, study: Study, jobs: int, progress: bool = True) -> None:
    """Ask and tell until the study holds `spec.trials` trials (those of every worker on
    every machine count)."""
    import optuna
    from tqdm import tqdm

    from sim.tuning.output import best_line

    S = optuna.trial.TrialState
    done_states = (S.COMPLETE, S.FAIL, S.PRUNED)
    if not study.get_trials(deepcopy=False):
        study.enqueue_trial(spec.defaults(), user_attrs={"defaults": True}, skip_if_exists=True)
    fail_stale(study)
    solo = solo_measurement(spec)
    if "solo" not in study.user_attrs:
        study.set_user_attr("solo", finite({str(s): m for s, m in zip(spec.seeds, solo, strict=True)}))
    dists: dict[str, BaseDistribution] = {d.name: d.distribution() for d in spec.dims}
    done = len(study.get_trials(deepcopy=False, states=done_states))
    pending: dict[cf.Future[Ran], Trial] = {}
    with (
        _Workers(jobs) as pool,
        tqdm(
            total=spec.trials,
            initial=min(done, spec.trials),
            desc="tune",
            unit="trial",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
        ) as bar,
    ):
        if progress:
            bar.set_postfix_str(best_line(spec, study), refresh=False)
        while True:
            while len(pending) < jobs:
                n = len(study.get_trials(deepcopy=False, states=(*done_states, S.RUNNING)))
                if n >= spec.trials:
                    break
                trial = study.ask(dists)
                trial.set_user_attr("worker", WORKER)
                if _duplicate_defaults(study, trial):
                    trial.set_user_attr("defaults", False)
                table = policy_table(spec.fixed, trial.params, spec.dims)
                job = Job(spec.document, {**spec.overrides, "policy": table}, spec.seeds, spec.cases, spec.batch, spec.traces)
                pending[pool.submit(run_job, job)] = trial
            if not pending:
                break
            ready, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in ready:
                tell(study, pending.pop(f), spec, solo, f)
                bar.update(1)
                if progress:  # reads every trial: only when someone watches
                    bar.set_postfix_str(best_line(spec, study), refresh=False)


def _duplicate_defaults(study: Study, trial: Trial) -> bool:
    """Workers that found the study empty at once each enqueued the defaults; the one with the
    lowest number stays the defaults trial, the others are ordinary trials."""
    if not trial.user_attrs.get("defaults"):
        return False
    return any(t.user_attrs.get("defaults") and t.number < trial.number for t in study.get_trials(deepcopy=False))
