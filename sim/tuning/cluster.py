"""`colosim tune --cluster ADDRESS`: each trial's simulations as tasks of a Dask distributed
cluster, one task per seed × case × trace, so one trial's pieces spread over the workers.

Why Dask distributed and not Ray: the tuner needs a task queue with retries, nothing more.
`distributed` is pure Python (a few MB with its dependencies, no compiled server), a cluster
is two commands any Dask user knows (`dask scheduler`, `dask worker ADDRESS`) and starts in
seconds on a 2-core CI machine; Ray's wheels are hundreds of MB, its head node runs a GCS
server and a raylet, and a local cluster takes far longer to come up. See docs/tuning.md.

The study stays in this process: it asks, submits a trial's pieces, joins what they measured
into the Measurement the local path gets from `measure` (the pieces are that same function on
one seed, one case, one trace: `run_job` of a smaller Job) and tells the storage as given
(SQLite, PostgreSQL, a journal). The core is deterministic per (scenario, seed), so a trial's
values are those of a local run.

A worker that dies mid-task: the scheduler hands its tasks to another worker; a task whose
workers died `distributed.scheduler.allowed-failures` + 1 times (3 + 1 by default: it is
what kills them) raises KilledWorker and its trial fails with that reason. A task that raises
(a configuration the agent refuses) is not retried: the error is deterministic. When the
cluster has no worker for NO_WORKER_S, the trials waiting on it fail with that reason and the
study stops (it never hangs); so does it when the scheduler is lost.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sim.errors import ScenarioError
from sim.tuning.evaluate import Measurement
from sim.tuning.study import Job, Ran, TrialError, one_line, run_job

if TYPE_CHECKING:
    from distributed import Client, Future

# how long the first contact with the scheduler may take, and how long this process waits for
# a first worker before any trial (a scheduler users started before their workers)
CONNECT_S = 10
FIRST_WORKER_S = 30
# a study with pending tasks and no worker for this long stops (the trials fail) rather than hang
NO_WORKER_S = 60
WATCH_S = 1.0

# what a piece hands back: the address of the worker that ran it, and what it measured
Piece = tuple[str, Measurement]


def pieces(job: Job) -> list[Job]:
    """The trial's simulations one by one, in the order `measure` runs them (seed, then trace,
    then case), each a Job of one seed, one case and at most one trace."""
    traces: list[str | None] = list(job.traces) if job.traces else [None]
    return [
        replace(job, seeds=[seed], cases=[case], traces=[] if trace is None else [trace])
        for seed in job.seeds
        for trace in traces
        for case in job.cases
    ]


def join(job: Job, parts: list[Measurement]) -> Measurement:
    """The pieces' measurements (in `pieces` order) as the one `measure` returns for the whole
    job: a list over seeds of {case: metrics}, the cases in the same order."""
    per_seed = len(parts) // len(job.seeds)
    out: Measurement = [{} for _ in job.seeds]
    for i, part in enumerate(parts):
        out[i // per_seed].update(part[0])
    return out


def run_piece(job: Job) -> Piece:
    """A task on a worker: the local trial function on one piece, and where it ran."""
    from distributed import get_worker

    return get_worker().address, run_job(job)[1]


def _failure(f: Future[Any]) -> BaseException:
    """Why a piece that did not finish failed."""
    try:
        f.result()
    except BaseException as err:  # noqa: BLE001 - what the task raised, or its cancellation
        return _why(err)
    return TrialError(f"its task {f.key} ended as {f.status}")


def _why(err: BaseException) -> BaseException:
    """A cluster failure as the reason its trial fails with (other errors pass as they are:
    the study's `_reason` words them as it does for a local trial)."""
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    if isinstance(err, KilledWorker):
        died = err.allowed_failures + 1
        return TrialError(
            f"worker {err.last_worker.address} died running it ({died} worker{'s' * (died > 1)} in all; the scheduler's "
            f"distributed.scheduler.allowed-failures is {err.allowed_failures}); see that worker's log"
        )
    if isinstance(err, CommClosedError | ConnectionError):
        # the connection to the scheduler broke while the trial's results were read: the
        # scheduler is gone (the watcher says so for the study a moment later)
        return TrialError(f"lost the scheduler ({one_line(err, 200)})")
    if isinstance(err, cf.CancelledError) or type(err).__name__ == "FutureCancelledError":
        return TrialError(f"the cluster cancelled its task ({one_line(err) or 'the scheduler was lost'})")
    return err


class Cluster:
    """The trial runner of `optimize` on a Dask cluster (what `_Workers` is on this machine):
    `submit(job)` returns a future of (worker addresses, measurement) for the whole trial."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.client = connect(address)
        self.lock = threading.Lock()
        # each trial's combined future, with its piece futures (kept so the scheduler keeps
        # their results until they are read)
        self.pending: dict[cf.Future[Ran], list[Future[Any]]] = {}
        self.broken: str | None = None
        self.stop = threading.Event()
        self.watch = threading.Thread(target=self._watch, name="cluster-watch", daemon=True)
        self.watch.start()

    def submit(self, job: Job) -> cf.Future[Ran]:
        """The trial's pieces as tasks; ScenarioError when the cluster can run nothing more
        (then every trial it held has failed with the reason)."""
        if self.broken is None and self.client.status != "running":
            self._break(f"lost the scheduler (its client is {self.client.status})")
        if self.broken is not None:
            raise ScenarioError(f"--cluster {self.address}: {self.broken}")
        trial: cf.Future[Ran] = cf.Future()
        work = pieces(job)
        tag = uuid.uuid4().hex[:12]
        try:
            # keys name the piece on the dashboard; unique, so no two trials share a task
            futures = [
                self.client.submit(run_piece, piece, key=f"colosim-{tag}-{i}-seed{piece.seeds[0]}", pure=False, retries=0)
                for i, piece in enumerate(work)
            ]
        except Exception as err:  # noqa: BLE001 - the client closed under us: the scheduler is gone
            self._break(f"lost the scheduler ({one_line(err, 200)})")
            raise ScenarioError(f"--cluster {self.address}: {self.broken}") from None
        with self.lock:
            self.pending[trial] = futures
        left = [len(futures)]

        def done(f: Future[Any]) -> None:
            # called on Dask's callback thread as each piece ends; the trial settles when the
            # last piece has, or at once when one fails (the rest are cancelled)
            with self.lock:
                if trial not in self.pending:
                    return
                left[0] -= 1
                # (a piece whose result was lost with its worker since is "lost", not failed:
                # the scheduler computes it again and result() below waits for it)
                failed = f.status in ("error", "cancelled")
                if left[0] and not failed:
                    return
                self.pending.pop(trial)
            try:
                if failed:
                    _settle(trial, error=_failure(f))
                else:
                    got: list[Piece] = [g.result() for g in futures]
                    where = sorted({addr for addr, _ in got})
                    _settle(trial, result=(where, join(job, [m for _, m in got])))
            except BaseException as err:  # noqa: BLE001 - e.g. a result lost with its worker
                _settle(trial, error=_why(err))
            finally:
                if failed:  # the trial's other pieces need not run
                    self.client.cancel([g for g in futures if not g.done()])
                for g in futures:
                    g.release()

        for f in futures:
            f.add_done_callback(done)
        return trial

    def _watch(self) -> None:
        """Fail the waiting trials when nothing can run them: no worker for NO_WORKER_S, or
        the scheduler lost. Their tasks would otherwise wait forever."""
        alone_since: float | None = None
        while not self.stop.wait(WATCH_S):
            with self.lock:
                waiting = bool(self.pending)
            if self.client.status not in ("running", "connecting"):
                self._break(f"lost the scheduler (its client is {self.client.status})")
                return
            if not waiting:
                alone_since = None
                continue
            try:
                workers = len(self.client.scheduler_info(n_workers=-1)["workers"])
            except Exception:  # noqa: BLE001 - a busy scheduler: asked again in a moment
                continue
            if workers:
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since > NO_WORKER_S:
                self._break(f"no worker in the cluster for {NO_WORKER_S} s")
                return

    def _break(self, reason: str) -> None:
        self.broken = reason
        with self.lock:
            stranded = list(self.pending.items())
            self.pending.clear()
        for trial, futures in stranded:
            _settle(trial, error=TrialError(f"cluster {self.address}: {reason}"))
            try:
                self.client.cancel(futures)
            except Exception:  # noqa: BLE001 - a closed client: the scheduler forgets them anyway
                pass

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Fail what still waits (the study stopped) and disconnect."""
        self.stop.set()
        self.watch.join()
        self._break("the study stopped")
        self.client.close(timeout=CONNECT_S)


def _settle(trial: cf.Future[Ran], result: Ran | None = None, error: BaseException | None = None) -> None:
    try:
        if error is not None:
            trial.set_exception(error)
        else:
            assert result is not None
            trial.set_result(result)
    except cf.InvalidStateError:
        pass  # settled already (the watcher failed it first)


def connect(address: str) -> Client:
    """A client of the scheduler at ADDRESS with at least one worker, or one line saying what
    is wrong with the address (before any trial)."""
    try:
        from distributed import Client
    except ImportError:
        raise ScenarioError(
            f"--cluster {address}: Dask distributed is not installed (pip install 'colosim[cluster]', on this machine and the workers)"
        ) from None
    from distributed.comm.addressing import get_address_host_port

    # the client logs its reconnection attempts with tracebacks; what a lost scheduler means
    # for the study is said once, by the study (a trial's error, the command's error line)
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):  # Dask's config gives some children levels of their own
            logging.getLogger(name).setLevel(logging.CRITICAL)

    try:  # checked first: a Client refused its address lingers and stalls the exit
        host, port = get_address_host_port(address)
        if not host or not 0 < port < 65536:
            raise ValueError("no host" if not host else f"port {port} out of range")
    except ValueError as err:
        raise ScenarioError(f"--cluster {address}: not a scheduler address like tcp://HOST:8786 ({err})") from None
    try:
        client = Client(address, timeout=CONNECT_S, set_as_default=False)
    except OSError as err:  # refused, unreachable, timed out
        raise ScenarioError(f"--cluster {address}: no Dask scheduler answered there ({one_line(err, 200)})") from None
    try:
        client.wait_for_workers(1, timeout=FIRST_WORKER_S)
    except TimeoutError:
        client.close()
        raise ScenarioError(
            f"--cluster {address}: the scheduler has no worker (waited {FIRST_WORKER_S} s); start some with `dask worker {address}`"
        ) from None
    return client
