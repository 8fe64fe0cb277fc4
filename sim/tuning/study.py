"""The Optuna study: storage, resume, the ask/tell loop, trials in worker processes.

The sampler lives in this process and asks; each trial's simulation runs in a process of its
own (`--jobs J` at once) and only its measurement comes back; this process tells the study.
So the storage is written from one place per machine, a trial that crashes its process costs
that trial only, and many machines share one study through an RDB URL: each runs the same
command and they stop together when the study holds `trials` trials.

A trial that raises (a policy configuration the agent refuses, a simulation error) is told
as FAILED with its reason in the user attribute `error`, and the study goes on.

A killed study leaves nothing behind: each trial process watches the study process (a pidfd)
and dies with it, and with its parent, the forkserver (PR_SET_PDEATHSIG); the forkserver and
multiprocessing's resource tracker end when the last process holding their pipes has. Each
trial records its `owner` (machine, pid and the pid's start time) when asked, and the study
process beats a heartbeat for the trials it runs: on resume (and now and then during a study)
a RUNNING trial whose owner is gone from this machine, or whose heartbeat stopped (an owner on
another machine), is failed with the user attribute `orphaned`. Such a trial measured nothing:
it does not count toward `trials`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import datetime
import gc
import math
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from sim import liveness
from sim.errors import ScenarioError
from sim.results import finite
from sim.tuning.evaluate import Measurement, measure
from sim.tuning.fidelity import Staging, make_pruner
from sim.tuning.machines import per_machine
from sim.tuning.outcome import Outcome, summarize
from sim.tuning.space import policy_table
from sim.tuning.spec import TuneSpec

if TYPE_CHECKING:
    from optuna import Study, Trial
    from optuna.distributions import BaseDistribution
    from optuna.samplers import BaseSampler
    from optuna.storages import BaseStorage
    from optuna.storages._heartbeat import BaseHeartbeat
    from optuna.trial import FrozenTrial

WORKER = f"{socket.gethostname()}:{os.getpid()}"
CREATE_ATTEMPTS = 5
# the study process records a heartbeat for each trial it runs this often (s); a trial of
# another machine whose heartbeat is older than GRACE_S is failed, and so is one no process
# claimed (no owner recorded) GRACE_S after it was asked
HEARTBEAT_S = 5
GRACE_S = 60


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
    # heartbeats are ours (ask/tell, not Study.optimize): Optuna's notes about them are not
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning, message=".*heartbeat")
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    for attempt in range(CREATE_ATTEMPTS):
        try:
            storage = optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
            study = optuna.create_study(
                storage=storage,
                study_name=name,
                load_if_exists=True,
                directions=spec.directions,
                sampler=make_sampler(spec),
                pruner=make_pruner(spec),
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
                raise ScenarioError(f"--storage {url}: {one_line(err, 300)}") from None
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


def ask(study: Study, dists: dict[str, BaseDistribution]) -> Trial:
    """`study.ask`, with the asking process on record from the moment the trial runs.

    Optuna's ask makes the trial RUNNING and then samples its parameters: a process killed
    in between would leave a RUNNING trial naming nobody. So a placeholder naming this
    process (`asker`) is enqueued first, in one write, and ask pops it (the earliest waiting
    trial: the defaults, or a placeholder); `claim` then records the trial's heartbeat and
    `owner`."""
    import optuna

    if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        study.enqueue_trial({}, user_attrs={"asker": liveness.me()})
    trial = study.ask(dists)
    claim(study, trial)
    return trial


def claim(study: Study, trial: Trial) -> None:
    """Record the trial's first heartbeat and which process runs it, in that order: a trial
    with an owner has a heartbeat, so a trial of another machine whose process died at any
    point goes stale."""
    _beat(study, [trial._trial_id])
    trial.set_user_attr("owner", liveness.me())
    trial.set_user_attr("worker", WORKER)


def _beat(study: Study, trial_ids: list[int]) -> None:
    storage = heartbeat_storage(study._storage)
    if storage is not None:
        for tid in trial_ids:
            storage.record_heartbeat(tid)


def heartbeat_storage(storage: BaseStorage) -> BaseHeartbeat | None:
    """The storage as Optuna's heartbeat interface, where its heartbeat is on."""
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    return storage if isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage) else None


def orphan_reason(t: FrozenTrial, stale: set[int], now: datetime.datetime) -> str | None:
    """Why a RUNNING trial is an orphan (its study process is gone), or None if it may be
    running still."""
    owner, asker = t.user_attrs.get("owner"), t.user_attrs.get("asker")
    old = t.datetime_start is not None and (now - t.datetime_start).total_seconds() > GRACE_S
    if isinstance(owner, dict):
        if liveness.gone(owner):
            return f"its study process ({liveness.describe(owner)}) is gone"
        if not liveness.same_machine(owner) and t._trial_id in stale:
            return f"its study process ({liveness.describe(owner)}) sent no heartbeat for {GRACE_S} s"
        return None
    if isinstance(asker, dict):
        # asked, never claimed: by the asker if that is gone (else by a peer that popped the
        # asker's placeholder and may have died as it asked)
        if liveness.gone(asker):
            return f"its study process ({liveness.describe(asker)}) is gone (killed as it asked)"
        return f"no process claimed it within {GRACE_S} s (its study process was killed as it asked)" if old else None
    # written before owners were recorded: "host:pid"
    host, _, pid = str(t.user_attrs.get("worker", "")).rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        return None if liveness.start_time(int(pid)) is not None else f"its study process (pid {pid} on {host}) is gone"
    if t._trial_id in stale:
        return f"its study process ({host or 'unknown'}) sent no heartbeat for {GRACE_S} s"
    if not host and old:
        return f"no process claimed it within {GRACE_S} s (its study process was killed as it asked)"
    return None


def fail_orphans(study: Study) -> int:
    """Fail every RUNNING trial whose study process is gone (see `orphan_reason`), with the
    reason in `error` and the user attribute `orphaned`, and the placeholders a gone process
    enqueued and never asked; returns how many RUNNING trials this call failed."""
    import optuna

    S = optuna.trial.TrialState
    storage = study._storage
    beating = heartbeat_storage(storage)
    stale = set(beating._get_stale_trial_ids(study._study_id)) if beating is not None else set()
    now = datetime.datetime.now()
    n = 0
    for t in study.get_trials(deepcopy=False, states=(S.RUNNING, S.WAITING)):
        if t.state is S.WAITING:
            asker = t.user_attrs.get("asker")
            if t.user_attrs.get("defaults") or not isinstance(asker, dict) or not liveness.gone(asker):
                continue
            reason: str | None = f"a placeholder of a study process ({liveness.describe(asker)}) killed before it asked"
        else:
            reason = orphan_reason(t, stale, now)
        if reason is None:
            continue
        try:
            if _fail_orphaned(storage, t._trial_id, reason) and t.state is S.RUNNING:
                n += 1
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # its owner finished it after all, or another process failed it first
    return n


def _fail_orphaned(storage: BaseStorage, trial_id: int, reason: str) -> bool:
    """Fail a trial nobody will finish, with `reason` in `error` and `orphaned` (not counted);
    whether this call failed it (False: already finished)."""
    import optuna

    storage.set_trial_user_attr(trial_id, "error", reason)
    storage.set_trial_user_attr(trial_id, "orphaned", True)
    return bool(storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL))


def withdraw_placeholders(study: Study) -> int:
    """Fail the placeholders this process enqueued that are still WAITING when it stops
    asking. `ask` enqueues one only when it sees none waiting, but two workers asking at once
    can each see the other's and pop a different one, leaving one behind that nobody will
    ask for (a peer that still asks takes it first: the pop is atomic, so a placeholder is
    either asked or withdrawn, never both). Returns how many were withdrawn."""
    import optuna

    S = optuna.trial.TrialState
    storage = study._storage
    me = liveness.me()
    n = 0
    for t in study.get_trials(deepcopy=False, states=(S.WAITING,)):
        if t.user_attrs.get("defaults") or t.user_attrs.get("asker") != me:
            continue
        try:
            if not storage.set_trial_state_values(t._trial_id, state=S.RUNNING):
                continue  # a peer popped it just now: it is that peer's trial
            storage.set_trial_user_attr(t._trial_id, "worker", WORKER)
            _fail_orphaned(storage, t._trial_id, "a placeholder left over when its study process stopped asking")
            n += 1
        except optuna.exceptions.UpdateFinishedTrialError:
            pass
    return n


def unclaimed(study: Study) -> bool:
    """A RUNNING trial that no process has claimed yet (normally for a moment after its ask)."""
    import optuna

    return any(
        "owner" not in t.user_attrs and "worker" not in t.user_attrs
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    )


def counted(study: Study) -> int:
    """Trials that count toward `trials`: finished or running, less the orphans."""
    import optuna

    S = optuna.trial.TrialState
    states = (S.COMPLETE, S.FAIL, S.PRUNED, S.RUNNING)
    return sum(1 for t in study.get_trials(deepcopy=False, states=states) if not t.user_attrs.get("orphaned"))


class Heartbeat:
    """A daemon thread recording a heartbeat for the trials this process runs."""

    def __init__(self, study: Study) -> None:
        self.study = study
        self.ids: set[int] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            with self.lock:
                ids = list(self.ids)
            try:
                _beat(self.study, ids)
            except Exception:  # noqa: BLE001 - a missed beat is retried; the study goes on
                pass

    def add(self, trial_id: int) -> None:
        with self.lock:
            self.ids.add(trial_id)

    def remove(self, trial_id: int) -> None:
        with self.lock:
            self.ids.discard(trial_id)

    def __enter__(self) -> Heartbeat:
        if heartbeat_storage(self.study._storage) is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()


def solo_measurement(spec: TuneSpec) -> Measurement:
    """Each case with every batch workload disabled and the scenario's own policy: the
    service alone, which `solo` in an SLO refers to."""
    off = {f"workloads.{b}.enabled": False for b in spec.batch}
    return measure(spec.document, {**spec.overrides, **off}, spec.seeds, spec.cases, spec.batch, spec.traces)


_P = ParamSpec("_P")
_T = TypeVar("_T")
# what a trial hands back: the pid of its process (or, on a cluster, the addresses of the
# workers that ran its pieces) and the measurement
Ran = tuple[int | list[str], Measurement]


class Runner(Protocol):
    """Where trials run: `_Workers` (processes of this machine) or `cluster.Cluster` (a Dask
    cluster). `submit` starts a trial's simulations and returns the future `tell` reads."""

    def submit(self, job: Job) -> cf.Future[Ran]: ...

    def __enter__(self) -> Runner: ...

    def __exit__(self, *exc: object) -> None: ...


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
        # A run leaves reference cycles holding the core's Node, which must be freed on the
        # thread that made it (it is not Send): collect them here, not whenever the
        # heartbeat thread happens to trigger a collection.
        gc.collect()
        return f


def _pool(jobs: int) -> cf.Executor:
    if jobs == 1:
        return _Inline()
    # forkserver with the simulator preloaded: a fresh process per trial costs a fork, not
    # an interpreter start; nothing of this process (storage connections, threads) is inherited.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["sim.tuning.study", "sim.runner", "policies", "sim._core"])
    return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1, initializer=_die_with, initargs=(liveness.me(),))


def _die_with(study_process: dict[str, Any]) -> None:
    """A trial process's first act: die with the study process, which is not its parent (the
    forkserver is), and with the forkserver. PR_SET_PDEATHSIG covers the forkserver (the
    getppid() check the case where it died before the prctl); the forkserver itself outlives
    the study process until its last child is gone, so the study process is watched."""
    liveness.set_parent_death_signal(signal.SIGKILL)
    try:  # after the prctl: is the parent still the forkserver (not init or a subreaper)?
        forkserver = b"multiprocessing.forkserver" in open(f"/proc/{os.getppid()}/cmdline", "rb").read()
    except OSError:
        forkserver = False
    if not forkserver:
        os._exit(1)
    liveness.watch_owner(study_process)


class _Workers:
    """The executor, renewed when a trial's process died (a dead worker breaks a process
    pool for good: the trials it was running fail with "the trial's process died", later
    ones get a fresh pool)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool = _pool(jobs)

    def submit(self, job: Job) -> cf.Future[Ran]:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.pool.submit(run_job, job)
        except BrokenProcessPool:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = _pool(self.jobs)
            return self.pool.submit(run_job, job)

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def tell(study: Study, trial: Trial, spec: TuneSpec, solo: Measurement, future: cf.Future[Ran]) -> Outcome | None:
    import optuna

    if study._storage.get_trial(trial._trial_id).state.is_finished():
        return None  # failed as an orphan by a peer that heard no heartbeat: it keeps that
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
    if spec.traces:
        trial.set_user_attr("machines", finite(per_machine(spec, measured, solo)))
    for text, v in outcome.constraints.items():
        trial.set_constraint(text, v)
    if any(math.isnan(v) for v in outcome.values):
        bad = ", ".join(o.text for o, v in zip(spec.objectives, outcome.values, strict=True) if math.isnan(v))
        trial.set_user_attr("error", f"objective not measurable: {bad} (a service completed no request)")
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return None
    study.tell(trial, outcome.values if spec.multi else outcome.values[0])
    return outcome


class TrialError(Exception):
    """A trial's failure that its runner words itself (e.g. a cluster worker that died)."""


def one_line(err: BaseException, limit: int | None = None) -> str:
    """An error's text on one line (its whitespace runs as single spaces), cut at `limit`."""
    return " ".join(str(err).split())[:limit]


def _reason(err: BaseException) -> str:
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(err, TrialError):
        return str(err)
    if isinstance(err, BrokenProcessPool):
        return "the trial's process died"
    if isinstance(err, KeyError) and err.args:
        return str(err.args[0])
    if isinstance(err, ValueError):  # ScenarioError, PolicyError, the core's refusals
        return one_line(err)
    return f"{type(err).__name__}: {err}"


def optimize(spec: TuneSpec, study: Study, jobs: int, progress: bool = True, runner: Runner | None = None) -> None:
    """Ask and tell until the study holds `spec.trials` trials (those of every worker on
    every machine count); `jobs` trials at once, run by `runner` (default: processes of this
    machine)."""
    import optuna
    from tqdm import tqdm

    from sim.tuning.output import best_line

    if not study.get_trials(deepcopy=False):
        study.enqueue_trial(spec.defaults(), user_attrs={"defaults": True, "asker": liveness.me()}, skip_if_exists=True)
    fail_orphans(study)
    checked = time.monotonic()
    solo = solo_measurement(spec)
    if "solo" not in study.user_attrs:
        study.set_user_attr("solo", finite({str(s): m for s, m in zip(spec.seeds, solo, strict=True)}))
    dists: dict[str, BaseDistribution] = {d.name: d.distribution() for d in spec.dims}
    done = counted(study) - len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))
    pending: dict[cf.Future[Ran], Trial] = {}
    with (
        tempfile.TemporaryDirectory(prefix="colosim-windows-") as windows,
        _Staged(spec, study, Path(windows)) as staging,
        Heartbeat(study) as heart,
        runner if runner is not None else _Workers(jobs) as pool,
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

        def submit(trial: Trial, overrides: dict[str, Any], traces: list[str]) -> cf.Future[Ran]:
            f = pool.submit(Job(spec.document, overrides, spec.seeds, spec.cases, spec.batch, traces))
            pending[f] = trial
            return f

        if progress:
            bar.set_postfix_str(best_line(spec, study), refresh=False)
        while True:
            if time.monotonic() - checked > HEARTBEAT_S:  # a peer (another machine) may have died
                fail_orphans(study)
                checked = time.monotonic()
            while len(pending) < jobs:
                if counted(study) >= spec.trials:
                    break
                trial = ask(study, dists)
                heart.add(trial._trial_id)
                if _duplicate_defaults(study, trial):
                    trial.set_user_attr("defaults", False)
                overrides = {**spec.overrides, "policy": policy_table(spec.fixed, trial.params, spec.dims)}
                try:
                    if staging is None:
                        trial.set_user_attr("simulated_s", whole_simulated_s(spec))
                        submit(trial, overrides, spec.traces)
                    else:  # the busiest windows first (sim/tuning/fidelity.py)
                        for i, (more, traces) in enumerate(staging.first(trial, overrides)):
                            staging.track(submit(trial, more, traces), i)
                except ScenarioError as err:
                    # the runner can run nothing more (a cluster that lost its scheduler or
                    # every worker; it settled what it held): the study stops with the reason,
                    # leaving no trial RUNNING
                    trial.set_user_attr("error", str(err))
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    for f, t in pending.items():
                        tell(study, t, spec, solo, f)
                    raise
            if not pending:
                # a trial asked by a study process killed before it claimed it has no owner:
                # wait until it is claimed (a live peer's, in a moment) or failed (GRACE_S)
                if unclaimed(study):
                    time.sleep(1.0)
                    fail_orphans(study)
                    checked = time.monotonic()
                    continue
                break
            ready, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in sorted(ready, key=lambda f: pending[f].number):
                trial = pending.pop(f)
                told: cf.Future[Ran] | None = f
                if staging is not None:
                    step = staging.arrived(study, trial, f)
                    for more, traces in step.runs:
                        submit(trial, more, traces)
                    if not step.done:
                        continue
                    told = step.told
                if told is not None:
                    tell(study, trial, spec, solo, told)
                heart.remove(trial._trial_id)
                bar.update(1)
                if progress:  # reads every trial: only when someone watches
                    bar.set_postfix_str(best_line(spec, study), refresh=False)
    withdraw_placeholders(study)


@contextlib.contextmanager
def _Staged(spec: TuneSpec, study: Study, directory: Path) -> Iterator[Staging | None]:
    """The window stage's plan (its cut traces in `directory`, the service alone in each
    window), made before the heartbeat thread starts: a simulation's objects are freed on the
    thread that made them (the core's Node is not Send)."""
    staging = Staging(spec, directory) if spec.fidelity == "window" else None
    gc.collect()  # as _Inline does after each run
    if "solo_simulated_s" not in study.user_attrs:
        solo_s = whole_simulated_s(spec) + (staging.simulated_s("window") if staging is not None else 0.0)
        study.set_user_attr("solo_simulated_s", solo_s)
    yield staging


def whole_simulated_s(spec: TuneSpec) -> float:
    """Simulated seconds of one whole trial: every seed, case and trace."""
    return spec.scenario.duration_s * len(spec.seeds) * len(spec.cases) * max(1, len(spec.traces))


def _duplicate_defaults(study: Study, trial: Trial) -> bool:
    """Workers that found the study empty at once each enqueued the defaults; the one with the
    lowest number stays the defaults trial, the others are ordinary trials."""
    if not trial.user_attrs.get("defaults"):
        return False
    return any(t.user_attrs.get("defaults") and t.number < trial.number for t in study.get_trials(deepcopy=False))
