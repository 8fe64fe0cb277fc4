//! Workloads are small state machines over tasks. The scheduler tells a workload when one of
//! its tasks finished its CPU work or when one of its timers fired; the workload answers with
//! what that task does next and which other tasks to wake, through `Effects`.

use crate::dist::Dist;
use crate::event_loop::{EventLoop, Step};
use crate::events::Ns;
use crate::rng::Rng;
use crate::shape::{AfterBurst, Rounds, Shaped, WAIT_OVER};
use crate::stats::ServiceStats;
use std::collections::VecDeque;

pub type TaskId = usize;

/// Work that never ends (a CPU hog's loop).
pub const FOREVER: u64 = u64::MAX / 4;

/// Slot number of a workload's start timer.
pub const START: u32 = u32::MAX;

/// What a task does after finishing its current CPU work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Compute(u64),
    Sleep,
}

#[derive(Debug, Default)]
pub struct Effects {
    /// Anonymous memory a task allocates (> 0) or frees (< 0), in bytes, before the work
    /// it is given next; the node charges it and adds what that costs (reclaim, a
    /// memory.high sleep, an OOM kill).
    pub charges: Vec<(TaskId, crate::memcg::Kind, i64)>,
    /// Sleeping tasks to wake with this much work.
    pub wakes: Vec<(TaskId, u64)>,
    /// Tasks to start for the first time (fork placement) with this much work.
    pub forks: Vec<(TaskId, u64)>,
    /// (time, workload, slot) timers to arm.
    pub timers: Vec<(Ns, usize, u32)>,
    /// IOs tasks submit; each completes with its workload's timer `tag` (disk.rs).
    pub io: Vec<(TaskId, IoReq)>,
    /// Network flows to switch on (true) or off (net.rs flow ids).
    pub net: Vec<(usize, bool)>,
    /// Page cache objects a task touches or brings in (lru.rs), after `charges`.
    pub cache: Vec<(TaskId, CacheOp)>,
    /// Messages of a closed loop with `cross_cpu` costs: what the node charges their
    /// receivers once it knows where they run (node.rs `charge_crossing`).
    pub sent: Vec<Sent>,
    /// The task whose message a timer delivers (a closed loop's request after its `delay`):
    /// the wakeups are placed as that task's own (its CPU, WF_SYNC when it sleeps), as the
    /// socket write that woke the server was. None: a timer's wakeups have no waker.
    pub sent_by: Option<TaskId>,
}

/// A closed loop's request or reply, sent by task `from` to task `to` (woken with it, or
/// running on into it): when `to` runs it on another CPU than the one `from` last ran on,
/// `to`'s work grows by `cost` (spec.rs `CrossCpu`), and service `svc` counts the crossing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub to: TaskId,
    pub from: TaskId,
    pub cost: u64,
    pub svc: usize,
}

/// What a task does to one page cache object of its workload's space (lru.rs).
#[derive(Debug, Clone, Copy)]
pub enum CacheOp {
    /// An access to a resident object (`folio_mark_accessed`).
    Touch(crate::lru::Space, u32),
    /// The object is read or written in: charge it and put it on the LRU (marked accessed:
    /// a read's access).
    Fill(crate::lru::Space, u32, bool),
}

/// One IO as a workload asks for it; the node adds the task's cgroup.
#[derive(Debug, Clone, Copy)]
pub struct IoReq {
    pub dir: crate::disk::Dir,
    pub bytes: u64,
    pub random: bool,
    pub direct: bool,
    pub tag: u32,
}

#[derive(Debug)]
pub struct Hog {
    pub threads: Vec<TaskId>,
}

#[derive(Debug)]
pub struct Client {
    pub outstanding: u32,
    pub issued_at: Ns,
    /// The generator slot (index into `generator`) that ran this client's last request's CPU:
    /// its request's sender; usize::MAX before any.
    pub sender: usize,
    /// The server thread whose reply this client's generator has yet to read (a reply that
    /// waits for a busy generator of a pool: its sender, for `cross_cpu`).
    pub replier: TaskId,
    /// The generator CPU of this client's part still to run (drawn, and split into its round,
    /// when the client became ready: drawn once): on a busy pool, or an event loop's pass.
    pub gen_work: u64,
}

impl Client {
    pub fn new() -> Client {
        Client {
            outstanding: 0,
            issued_at: 0,
            sender: usize::MAX,
            replier: usize::MAX,
            gen_work: 0,
        }
    }
}

impl Default for Client {
    fn default() -> Client {
        Client::new()
    }
}

#[derive(Debug)]
pub struct ClosedLoop {
    pub svc: usize,
    pub fanout: u32,
    /// threads[client * fanout + k]
    pub threads: Vec<TaskId>,
    pub clients: Vec<Client>,
    pub service: Dist,
    pub think: Option<Dist>,
    /// The load generator's CPU per request (spec.rs), spent by `generator[client]` (slot
    /// `threads.len() + client`) before the client sends its request.
    pub client_cpu: Option<Dist>,
    pub generator: Vec<TaskId>,
    /// The generator's threads as a pool that serves its clients in turn (`client_threads`:
    /// redis-benchmark's one event loop, wrk's -t), or None: a task per client.
    pub gen_pool: Option<Box<Pool>>,
    /// A wait per request inside its latency, after the client's CPU and before the request
    /// reaches the server (loopback round trips and wake-ups: time that is neither CPU nor
    /// queueing). With it or `client_cpu`, a request's latency runs from when its client is
    /// ready, as a load generator that times the whole exchange measures it.
    pub delay: Option<Dist>,
    pub rng: Rng,
    /// A fixed pool of worker threads serving the clients' requests (`threads` are then the
    /// workers), or None for a thread per client.
    pub pool: Option<Box<Pool>>,
    /// Requests in bursts and waits on each thread (shape.rs), or None: one burst.
    pub shape: Option<Shaped>,
    /// The client↔server exchange in rounds (shape.rs `Rounds`), or None: one round (boxed:
    /// most loops have none, and the workload enum stays small).
    pub rounds: Option<Box<Rounds>>,
    /// What a message costs its receiver when the client's and the server's tasks run on
    /// different CPUs (spec.rs `CrossCpu`), or None: nothing.
    pub cross: Option<Box<Crossing>>,
    /// The generator's threads as event loops (event_loop.rs; spec `event_loop`), or None.
    pub ev: Option<Box<EventLoop>>,
    /// The clients a pool's worker replies to at once (reused: `Pool::finished`).
    pub replies: Vec<usize>,
}

/// A closed loop's `cross_cpu` and what deciding it needs.
#[derive(Debug)]
pub struct Crossing {
    pub cost: crate::spec::CrossCpu,
    /// The CPU each server thread, then each generator task, runs or last ran on (node_memory.rs
    /// `refresh_view` copies it before the loop decides anything).
    pub cpu_of: Vec<usize>,
}

/// Workers of a closed loop's pool. `Dispatch::Queue`: requests wait in one FIFO for the
/// first free worker (a thread pool, Go's scheduler). `Dispatch::Connection`: each client's
/// connection belongs to one worker, and its requests wait for that worker alone — an
/// event-loop server's worker processes (nginx, memcached's threads) each serve the
/// connections they accepted, so a worker kept off its CPU holds every one of them while its
/// siblings idle or run on.
#[derive(Debug)]
pub struct Pool {
    /// Idle worker slots, the most recently idled reused first (as in `OpenLoop`).
    pub idle: Vec<u32>,
    /// Clients whose request waits: one FIFO, or one per worker by connection.
    queues: Vec<VecDeque<usize>>,
    /// The client each worker is serving.
    pub serving: Vec<usize>,
    /// The worker that owns each client's connection (`Dispatch::Connection`; else empty).
    owners: Vec<u32>,
    /// `Replies::Pass`: per worker, the requests of its current pass still to serve and the
    /// clients whose replies it holds until the pass ends (None: each reply goes at once).
    pass: Option<Box<Passes>>,
}

/// An event-loop server's passes (`Replies::Pass`): redis-server reads and runs the commands
/// of every client that is ready when its `aeProcessEvents` pass starts, queuing each reply in
/// the client's buffer (`addReply` → `clients_pending_write`), and writes them all in
/// `beforeSleep` (`handleClientsWithPendingWrites`) before it waits again. A pass is the
/// requests waiting for the worker when it starts one; requests that arrive meanwhile wait for
/// the next.
#[derive(Debug)]
pub struct Passes {
    left: Vec<u32>,
    held: Vec<Vec<usize>>,
}

impl Pool {
    /// A pool of `workers` that serve one FIFO (`Dispatch::Queue`).
    pub fn queue(workers: u32) -> Pool {
        Pool {
            idle: (0..workers).rev().collect(),
            queues: vec![VecDeque::new()],
            serving: vec![0; workers as usize],
            owners: Vec::new(),
            pass: None,
        }
    }

    /// The same pool, its workers replying at the end of each pass (`Replies::Pass`).
    pub fn replying_by_pass(mut self) -> Pool {
        let n = self.serving.len();
        self.pass = Some(Box::new(Passes {
            left: vec![0; n],
            held: vec![Vec::new(); n],
        }));
        self
    }

    /// Worker `w` finished client `c`'s request. With passes, its reply is held and, while the
    /// pass has requests left, none is given: Some(the next client of the pass), which the
    /// worker then serves. Otherwise the clients to reply to now (c alone without passes; all
    /// the pass held, in the order served) go in `replies`, and None.
    fn finished(&mut self, w: u32, c: usize, replies: &mut Vec<usize>) -> Option<usize> {
        let Some(p) = self.pass.as_mut() else {
            replies.push(c);
            return None;
        };
        p.held[w as usize].push(c);
        if p.left[w as usize] > 0 {
            let q = if self.owners.is_empty() { 0 } else { w as usize };
            if let Some(next) = self.queues[q].pop_front() {
                p.left[w as usize] -= 1;
                return Some(next);
            }
            p.left[w as usize] = 0; // (taken by another worker of a shared queue)
        }
        replies.append(&mut p.held[w as usize]);
        None
    }

    /// Worker `w` starts a pass with the request it takes now: the pass holds the requests
    /// waiting for it at this moment too.
    fn start_pass(&mut self, w: u32) {
        if let Some(p) = self.pass.as_mut() {
            let q = if self.owners.is_empty() { 0 } else { w as usize };
            p.left[w as usize] = self.queues[q].len() as u32;
        }
    }

    /// A pool of `workers` that each serve the connections they own (`Dispatch::Connection`),
    /// each of the `clients`' owner drawn uniformly from `rng`: which idle nginx worker's
    /// epoll_wait an accept wakes is the kernel's choice (EPOLLEXCLUSIVE wakes one waiter),
    /// and on this host 10 of wrk's connections split 3/7, 4/6 and 5/5 between 2 workers in
    /// three runs (docs/model.md, "Worker pools").
    pub fn by_connection(workers: u32, clients: usize, rng: &mut Rng) -> Pool {
        Pool {
            queues: vec![VecDeque::new(); workers as usize],
            owners: (0..clients)
                .map(|_| (rng.next_u64() % u64::from(workers)) as u32)
                .collect(),
            ..Pool::queue(workers)
        }
    }

    /// The worker that owns client `c`'s connection (None: any worker serves it).
    fn owner(&self, c: usize) -> Option<u32> {
        self.owners.get(c).copied()
    }

    /// The worker free to take client `c`'s request now, without taking it.
    fn free_for(&self, c: usize) -> Option<u32> {
        match self.owner(c) {
            None => self.idle.last().copied(),
            Some(w) => self.idle.contains(&w).then_some(w),
        }
    }

    /// Takes the worker free to serve client `c`'s request, if one is.
    fn take_for(&mut self, c: usize) -> Option<u32> {
        match self.owner(c) {
            None => self.idle.pop(),
            Some(w) => {
                let i = self.idle.iter().position(|&x| x == w)?;
                Some(self.idle.swap_remove(i))
            }
        }
    }

    /// Client `c`'s request waits for its worker (or any).
    fn enqueue(&mut self, c: usize) {
        let q = self.owner(c).unwrap_or(0) as usize;
        self.queues[q].push_back(c);
    }

    /// The next request worker `w` takes: the oldest waiting for it.
    fn next_for(&mut self, w: u32) -> Option<usize> {
        let q = if self.owners.is_empty() { 0 } else { w as usize };
        self.queues[q].pop_front()
    }
}

#[derive(Debug)]
pub struct OpenLoop {
    pub svc: usize,
    pub workers: Vec<TaskId>,
    /// Idle worker slots; the most recently idled is reused first (a LIFO pool keeps a warm
    /// thread busy, as common thread pools do).
    pub idle: Vec<u32>,
    /// Arrival times of requests waiting for a worker (FIFO).
    pub queue: VecDeque<Ns>,
    /// Arrival time of the request each worker is serving.
    pub serving: Vec<Ns>,
    pub mean_interarrival_ns: f64,
    pub service: Dist,
    pub rng: Rng,
    /// Requests that may wait for a worker (a listen backlog); arrivals beyond are dropped.
    pub backlog: usize,
    /// Since when the backlog has been full. Arrivals then stop being events: every one of
    /// them until a request leaves the queue would be dropped, so they are counted when it
    /// does (`settle_drops`), and the next arrival is drawn from then on — the same process,
    /// a Poisson process being memoryless, without an event per dropped request.
    pub full_since: Option<Ns>,
    /// Dropped requests counted but not yet whole (the count over a full interval is its
    /// expectation, rate × time; a fraction carries to the next).
    pub drop_frac: f64,
    /// Requests in bursts and waits on their worker (shape.rs), or None: one burst.
    pub shape: Option<Shaped>,
}

/// Thread `k` takes a request of `total` CPU: the work it runs first (all of it, unshaped).
fn first_burst(shape: &mut Option<Shaped>, k: usize, total: u64) -> u64 {
    match shape {
        Some(s) => s.start(k, total),
        None => total,
    }
}

/// Thread `slot` finished a burst: what it does next while its request has bursts left (it
/// sleeps a wait — a timer `WAIT_OVER + slot` wakes it through the node's wakeup path — or
/// runs on when the wait drawn is 0), or None when the request's CPU on it is all run.
fn between_bursts(
    shape: &mut Option<Shaped>,
    slot: u32,
    now: Ns,
    wl: usize,
    rng: &mut Rng,
    eff: &mut Effects,
) -> Option<Next> {
    match shape.as_mut()?.after_burst(slot as usize, rng) {
        AfterBurst::Done => None,
        AfterBurst::Continue(part) => Some(Next::Compute(part)),
        AfterBurst::Wait(wait) => {
            eff.timers.push((now.saturating_add(wait), wl, WAIT_OVER + slot));
            Some(Next::Sleep)
        }
    }
}

/// A timer slot of a closed or open loop that ends a wait between bursts: the thread's slot.
fn wait_over(slot: u32) -> Option<u32> {
    (slot != START && slot >= WAIT_OVER).then(|| slot - WAIT_OVER)
}

impl OpenLoop {
    fn full(&self) -> bool {
        self.idle.is_empty() && self.queue.len() >= self.backlog
    }

    /// Count the arrivals dropped since the backlog filled, up to `now`.
    pub fn settle_drops(&mut self, now: Ns, stats: &mut ServiceStats) {
        if let Some(since) = self.full_since.as_mut() {
            self.drop_frac += now.saturating_sub(*since) as f64 / self.mean_interarrival_ns;
            *since = now;
            let whole = self.drop_frac.floor();
            stats.dropped += whole as u64;
            self.drop_frac -= whole;
        }
    }

    /// The next arrival, `gap` from now.
    fn arm(&mut self, now: Ns, wl: usize, eff: &mut Effects) {
        let gap = self.rng.exponential(self.mean_interarrival_ns).round().max(1.0) as u64;
        eff.timers.push((now.saturating_add(gap), wl, 0));
    }
}

/// A service that runs steadily on `steady` threads and, every `every` ns, bursts: each of
/// the `burst` threads gets `length` ns of work. A spell is a "request": its latency is how
/// long the burst took, so throttling shows up as stretched spells (seed 001, case 2).
#[derive(Debug)]
pub struct Bursty {
    pub svc: usize,
    pub steady: Vec<TaskId>,
    pub burst: Vec<TaskId>,
    pub every: Ns,
    pub length: Ns,
    pub outstanding: u32,
    pub issued_at: Ns,
    /// A spell fell due while the previous one was still running: start it when that ends.
    pub pending: bool,
}

/// Timer slot of a bursty workload's spells.
pub const SPELL: u32 = 0;

impl Bursty {
    fn spell(&mut self, now: Ns, eff: &mut Effects, svc: &mut ServiceStats) {
        svc.started += 1;
        self.outstanding = self.burst.len() as u32;
        self.issued_at = now;
        eff.wakes.extend(self.burst.iter().map(|&t| (t, self.length)));
    }
}

/// `stress --vm`: each worker allocates in chunks, touching the pages, then keeps, hangs
/// on or frees its memory (spec.rs `MemoryHog`).
#[derive(Debug)]
pub struct MemoryHog {
    pub threads: Vec<TaskId>,
    /// Bytes each worker has allocated.
    pub held: Vec<u64>,
    pub bytes: u64,
    pub chunk: u64,
    pub touch_ns_per_page: u64,
    pub mode: crate::spec::HogMode,
    pub hang_ns: u64,
}

impl MemoryHog {
    /// Allocate the next chunk of worker `k`: the charge, and the CPU to touch it.
    fn next_chunk(&mut self, k: usize, eff: &mut Effects) -> u64 {
        let c = self.chunk.min(self.bytes - self.held[k]);
        self.held[k] += c;
        eff.charges.push((self.threads[k], crate::memcg::Kind::Anon, c as i64));
        (c.div_ceil(crate::memcg::PAGE) * self.touch_ns_per_page).max(1)
    }

    fn free_all(&mut self, k: usize, eff: &mut Effects) {
        if self.held[k] > 0 {
            eff.charges
                .push((self.threads[k], crate::memcg::Kind::Anon, -(self.held[k] as i64)));
            self.held[k] = 0;
        }
    }
}

/// A file-serving service (nginx serving static files to siege-like clients): a request reads
/// one file of a working set, drawn uniformly. With memory modelled each file is a page cache
/// object on its cgroup's LRU (lru.rs): a request hits when its file is resident (`resident`,
/// refreshed by the node before a call when the lists changed) and the read marks it accessed;
/// a miss — a file not wholly resident (what mincore(2) says of it) — first waits for the
/// disk to read its missing pages — one disk, reads served in order, each latency + size /
/// bandwidth — and brings them in. Then the request takes its CPU. (Without memory, no
/// file is ever cached: `cached` stays 0.)
#[derive(Debug)]
pub struct FileServer {
    pub svc: usize,
    pub cg: usize,
    pub threads: Vec<TaskId>,
    pub clients: Vec<Client>,
    pub service: Dist,
    pub think: Option<Dist>,
    pub rng: Rng,
    pub working_set: u64,
    pub file_bytes: u64,
    pub disk_ns: u64,
    /// Of which the latency (the rest is the file's bytes at the disk's bandwidth).
    pub disk_latency_ns: u64,
    /// When the disk finishes the reads queued so far.
    pub disk_free_at: Ns,
    pub cached: u64,
    pub hits: u64,
    pub misses: u64,
    /// Its files on the LRU (None: memory is not modelled) and the node's view of them:
    /// each file's resident bytes.
    pub space: Option<crate::lru::Space>,
    pub resident: Vec<u64>,
    pub seen_epoch: Option<u64>,
    /// The file each client is reading.
    pub reading: Vec<u32>,
    /// The node has a disk: misses read through it (disk.rs) instead of `disk_ns`.
    pub node_disk: bool,
}

/// Timer slots of a file server at or above this are a client's disk read completing.
pub const DISK_DONE: u32 = 1 << 30;
/// Timer slot of a closed loop's request whose delay is over (+ client). Slot ranges of one
/// workload must not overlap: clients and threads are below PID_MAX_LIMIT (2^22), a shaped
/// thread's wait is `WAIT_OVER` (2^29) + thread, a file server's read `DISK_DONE` (2^30) + client.
pub const DELAY_DONE: u32 = 1 << 28;
const _: () = assert!(DELAY_DONE + (1 << 22) <= WAIT_OVER && WAIT_OVER + (1 << 22) <= DISK_DONE);

impl FileServer {
    /// Client `c` sends a request: its work now (a hit), or None (a miss, waiting for the disk).
    fn issue(&mut self, c: usize, now: Ns, wl: usize, eff: &mut Effects, svc: &mut ServiceStats) -> Option<u64> {
        svc.started += 1;
        self.clients[c].issued_at = now;
        let mut missing = self.file_bytes;
        let hit = match self.space {
            Some(s) => {
                let n = self.resident.len();
                let file = ((self.rng.uniform() * n as f64) as usize).min(n - 1) as u32;
                self.reading[c] = file;
                let resident = self.resident[file as usize];
                missing = self.file_bytes - resident;
                if missing == 0 {
                    eff.cache.push((self.threads[c], CacheOp::Touch(s, file)));
                }
                missing == 0
            }
            None => self.rng.uniform() < self.cached.min(self.working_set) as f64 / self.working_set as f64,
        };
        if hit {
            self.hits += 1;
            svc.hits += 1;
            return Some(self.service.sample(&mut self.rng).max(1));
        }
        self.misses += 1;
        svc.misses += 1;
        if self.node_disk {
            // one device queue per node: the read waits with the flusher's writeback
            eff.io.push((
                self.threads[c],
                IoReq {
                    dir: crate::disk::Dir::Read,
                    bytes: missing,
                    random: true,
                    direct: false,
                    tag: DISK_DONE + c as u32,
                },
            ));
            return None;
        }
        // the missing pages only: latency + their bytes at the bandwidth
        let transfer = self.disk_ns - self.disk_latency_ns;
        let ns = self.disk_latency_ns + (transfer as u128 * missing as u128 / self.file_bytes.max(1) as u128) as u64;
        self.disk_free_at = self.disk_free_at.max(now) + ns;
        eff.timers.push((self.disk_free_at, wl, DISK_DONE + c as u32));
        None
    }
}

/// `dd conv=notrunc`/`stress --hdd`: threads rewriting a file of WRITER_FILE_BYTES each,
/// forever, `chunk` bytes at a time at `write_ns_per_page` of CPU a page; every chunk written
/// stays in the page cache (charged to the writer's cgroup) until reclaim takes it. With
/// memory modelled each chunk is an LRU object (a write does not mark it accessed); one
/// still resident when the writer comes round again is rewritten in place.
#[derive(Debug)]
pub struct CacheWriter {
    pub threads: Vec<TaskId>,
    pub chunk: u64,
    pub write_ns_per_page: u64,
    /// Each thread's file on the LRU (None: memory not modelled) and where it writes next.
    pub space: Vec<crate::lru::Space>,
    pub at: Vec<u32>,
    pub chunks: u32,
    /// The node has a disk: its writes go through it (disk.rs's dirty pages and flusher).
    pub disk: bool,
}

/// A cache writer's timer slot for a buffered write's admission (nothing waits for it:
/// below vm.dirty_ratio balance_dirty_pages lets the write through at once).
const WRITTEN: u32 = DISK_DONE;

/// The file each writer thread rewrites (replay's `dd` over a 1 GiB file per thread).
pub const WRITER_FILE_BYTES: u64 = 1 << 30;

impl CacheWriter {
    fn next_chunk(&mut self, k: usize, eff: &mut Effects) -> u64 {
        match self.space.get(k) {
            Some(&s) => {
                let i = self.at[k];
                self.at[k] = (i + 1) % self.chunks;
                eff.cache.push((self.threads[k], CacheOp::Fill(s, i, false)));
                if self.disk {
                    // buffered: into the disk's dirty pages, written back by the flusher
                    eff.io.push((
                        self.threads[k],
                        IoReq {
                            dir: crate::disk::Dir::Write,
                            bytes: self.chunk,
                            random: false,
                            direct: false,
                            tag: WRITTEN,
                        },
                    ));
                }
            }
            None => eff
                .charges
                .push((self.threads[k], crate::memcg::Kind::File, self.chunk as i64)),
        }
        (self.chunk.div_ceil(crate::memcg::PAGE) * self.write_ns_per_page).max(1)
    }
}

/// The in-memory analytics job of spec.rs `Analytics`. `swapped[k]`: the share of worker k's
/// set that is in swap, refreshed by the node before every call.
#[derive(Debug)]
pub struct Analytics {
    pub svc: usize,
    pub cg: usize,
    pub threads: Vec<TaskId>,
    pub share: u64,
    pub work: u64,
    pub fault_penalty: f64,
    pub swapped: Vec<f64>,
    pub started_at: Vec<Ns>,
    /// Bytes of its share each worker has loaded (1 MiB steps at the memory hog's touch cost).
    pub loaded: Vec<u64>,
    /// Worker k's current piece is a task (not a load step).
    pub task_running: Vec<bool>,
}

/// An analytics worker loads its data in steps of this size.
const LOAD_CHUNK: u64 = 1 << 20;
const TOUCH_NS_PER_PAGE: u64 = 800;

impl Analytics {
    fn task_work(&self, k: usize) -> u64 {
        ((self.work as f64) * (1.0 + self.fault_penalty * self.swapped[k]))
            .round()
            .max(1.0) as u64
    }

    /// Worker k's next piece of work: the next chunk of its data while loading (charged),
    /// else its next task (a request from now).
    fn next(&mut self, k: usize, now: Ns, eff: &mut Effects, svc: &mut ServiceStats) -> u64 {
        if self.loaded[k] < self.share {
            let c = LOAD_CHUNK.min(self.share - self.loaded[k]);
            self.loaded[k] += c;
            self.task_running[k] = false;
            eff.charges.push((self.threads[k], crate::memcg::Kind::Anon, c as i64));
            return (c.div_ceil(crate::memcg::PAGE) * TOUCH_NS_PER_PAGE).max(1);
        }
        svc.started += 1;
        self.started_at[k] = now;
        self.task_running[k] = true;
        self.task_work(k)
    }
}

/// spec.rs `Duty`: per period, thread k is given min(1, cores − k) of the period's CPU.
#[derive(Debug)]
pub struct Duty {
    pub threads: Vec<TaskId>,
    pub cores: f64,
    pub period: Ns,
    /// Thread k still has work from an earlier period (the node could not give it all, or
    /// it ends exactly at the boundary), and the share it takes next when it finishes (one
    /// period's at most: an unmet demand does not pile up).
    pub busy: Vec<bool>,
    pub pending: Vec<u64>,
    /// Anonymous memory it holds (set at run time, charged to its first thread).
    pub memory: u64,
}

impl Duty {
    fn share(&self, k: usize) -> u64 {
        ((self.cores - k as f64).clamp(0.0, 1.0) * self.period as f64).round() as u64
    }
}

/// spec.rs `Dd`: each thread alternates a block's syscall CPU and the block's IO.
#[derive(Debug)]
pub struct Dd {
    pub svc: usize,
    pub threads: Vec<TaskId>,
    pub dir: crate::disk::Dir,
    pub direct: bool,
    pub random: bool,
    pub block: u64,
    /// Blocks each thread has left (None: forever).
    pub left: Vec<Option<u64>>,
    pub cpu_ns: u64,
    pub issued_at: Vec<Ns>,
}

impl Dd {
    fn io(&self, k: usize, eff: &mut Effects) {
        // buffered IO goes through (and stays in) the page cache of the cgroup
        if !self.direct {
            eff.charges
                .push((self.threads[k], crate::memcg::Kind::File, self.block as i64));
        }
        eff.io.push((
            self.threads[k],
            IoReq {
                dir: self.dir,
                bytes: self.block,
                random: self.random,
                direct: self.direct,
                tag: DISK_DONE + k as u32,
            },
        ));
    }
}

/// spec.rs `Database`: a request is `reads` random reads in a row, then its CPU.
#[derive(Debug)]
pub struct Database {
    pub svc: usize,
    pub threads: Vec<TaskId>,
    pub clients: Vec<Client>,
    pub reads: u32,
    pub read_bytes: u64,
    /// Reads each client's request still has to do.
    pub left: Vec<u32>,
    pub service: Dist,
    pub think: Option<Dist>,
    pub rng: Rng,
}

impl Database {
    fn read(&self, c: usize, eff: &mut Effects) {
        let req = IoReq {
            dir: crate::disk::Dir::Read,
            bytes: self.read_bytes,
            random: true,
            direct: true,
            tag: DISK_DONE + c as u32,
        };
        eff.io.push((self.threads[c], req));
    }

    /// Client `c` sends a request: its CPU now (no reads), or None (reading first).
    fn issue(&mut self, c: usize, now: Ns, eff: &mut Effects, svc: &mut ServiceStats) -> Option<u64> {
        svc.started += 1;
        self.clients[c].issued_at = now;
        if self.reads == 0 {
            return Some(self.service.sample(&mut self.rng).max(1));
        }
        self.left[c] = self.reads;
        self.read(c, eff);
        None
    }
}

/// spec.rs `Iperf`: flows switched on and off by its windows (timer 2i: window i starts,
/// 2i + 1: it ends).
#[derive(Debug)]
pub struct Iperf {
    pub flows: Vec<usize>,
    pub windows: Vec<(Ns, Ns)>,
}

#[derive(Debug)]
pub enum Workload {
    Hog(Hog),
    ClosedLoop(ClosedLoop),
    OpenLoop(OpenLoop),
    Bursty(Bursty),
    MemoryHog(MemoryHog),
    FileServer(FileServer),
    CacheWriter(CacheWriter),
    Analytics(Analytics),
    Duty(Duty),
    Dd(Dd),
    Database(Database),
    Iperf(Iperf),
}

impl ClosedLoop {
    /// A request of client `c` reaches server thread `to` (woken with it, or running on into
    /// it): charged by the node when the generator ran elsewhere.
    fn request_to(&self, c: usize, to: TaskId, eff: &mut Effects) {
        self.message(self.sender_task(c), to, |x| x.server_ns, eff);
    }

    /// The task that sent client `c`'s last request (usize::MAX: none yet).
    fn sender_task(&self, c: usize) -> TaskId {
        self.generator
            .get(self.clients[c].sender)
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// Generator task `to` reads client `c`'s reply (sent by `clients[c].replier`).
    fn reply_to(&self, c: usize, to: TaskId, eff: &mut Effects) {
        self.message(self.clients[c].replier, to, |x| x.client_ns, eff);
    }

    /// A message from `from` (none: usize::MAX) to `to`, of the cost `cost` picks, for the
    /// node to charge (node.rs `charge_crossing`); nothing without `cross_cpu`.
    fn message(&self, from: TaskId, to: TaskId, cost: fn(&crate::spec::CrossCpu) -> u64, eff: &mut Effects) {
        if let (Some(x), true) = (&self.cross, from != usize::MAX) {
            eff.sent.push(Sent {
                to,
                from,
                cost: cost(&x.cost),
                svc: self.svc,
            });
        }
    }

    /// Client `c`'s generator CPU `work` (its reply read, its next request made): on the
    /// client's own task, or on a free thread of the generator's pool, or queued for one.
    fn hand_to_generator(&mut self, c: usize, work: u64, eff: &mut Effects) {
        let g = match self.gen_pool.as_mut() {
            None => c,
            Some(p) => match p.take_for(c) {
                Some(g) => {
                    p.serving[g as usize] = c;
                    g as usize
                }
                None => {
                    p.enqueue(c);
                    self.clients[c].gen_work = work;
                    return;
                }
            },
        };
        self.reply_to(c, self.generator[g], eff);
        eff.wakes.push((self.generator[g], work));
    }

    /// The start of an event-loop generator: each thread writes its clients' first requests.
    pub fn start_event_loop(&mut self, now: Ns, eff: &mut Effects, svc: &mut ServiceStats) {
        let Some(d) = self.client_cpu.as_ref() else { return };
        for c in 0..self.clients.len() {
            svc.started += 1;
            self.clients[c].gen_work = d.sample(&mut self.rng).max(1);
        }
        for g in 0..self.generator.len() {
            let step = self.ev.as_mut().map_or(Step::Idle, |ev| ev.start(g));
            if step != Step::Idle {
                let part = self.step_work(g, step, now, eff);
                eff.wakes.push((self.generator[g], part));
            }
        }
    }

    /// The CPU of an event loop's step on thread g, starting `now` (a reply read is a message
    /// it receives; a write starts its request's clock, before the write itself, where wrk's
    /// socket_writeable and redis-benchmark's writeHandler take it).
    fn step_work(&mut self, g: usize, step: Step, now: Ns, eff: &mut Effects) -> u64 {
        match step {
            Step::Read(c) => {
                self.reply_to(c, self.generator[g], eff);
                self.ev.as_ref().map_or(1, |ev| ev.read_part(self.clients[c].gen_work))
            }
            Step::Write(c) => {
                let work = self.clients[c].gen_work;
                self.ev.as_mut().map_or(1, |ev| {
                    ev.sent_at[c] = now;
                    ev.write_part(work)
                })
            }
            Step::Idle => 1,
        }
    }

    /// Event-loop thread g finished a step: a read ends its request's latency, a write sends
    /// the request; then the next step of its pass, or sleep.
    fn event_loop_done(&mut self, g: usize, now: Ns, wl: usize, eff: &mut Effects, svc: &mut ServiceStats) -> Next {
        let Some(ev) = self.ev.as_mut() else { return Next::Sleep };
        match ev.step_of(g) {
            Step::Read(c) => svc.record(now, now - ev.sent_at[c]),
            Step::Write(c) => {
                self.clients[c].sender = g;
                self.clients[c].issued_at = now;
                self.after_client(c, now, wl, None, eff);
            }
            Step::Idle => {}
        }
        match self.ev.as_mut().map_or(Step::Idle, |ev| ev.done(g)) {
            Step::Idle => Next::Sleep,
            step => Next::Compute(self.step_work(g, step, now, eff)),
        }
    }

    /// Generator thread `g` finished client `c`'s CPU; with a pool, it takes the next waiting
    /// client's (its CPU drawn now), or goes idle.
    pub fn generator_done(&mut self, g: usize, now: Ns, wl: usize, eff: &mut Effects, svc: &mut ServiceStats) -> Next {
        if self.ev.is_some() {
            return self.event_loop_done(g, now, wl, eff, svc);
        }
        let c = self.gen_pool.as_ref().map_or(g, |p| p.serving[g]);
        self.clients[c].sender = g;
        if let Some(next) = self.client_part_done(c, now, wl, eff, svc) {
            return next;
        }
        let Some(p) = self.gen_pool.as_mut() else {
            return Next::Sleep;
        };
        match p.next_for(g as u32) {
            Some(next) => {
                p.serving[g] = next;
                self.reply_to(next, self.generator[g], eff);
                Next::Compute(self.clients[next].gen_work)
            }
            None => {
                p.idle.push(g as u32);
                Next::Sleep
            }
        }
    }

    /// Worker `slot` of the pool replies to client `c`: the client thinks or asks again.
    fn reply_done(&mut self, c: usize, slot: u32, now: Ns, wl: usize, eff: &mut Effects, svc: &mut ServiceStats) {
        if self.ev.is_none() {
            // (an event loop's latency ends where its generator reads the reply)
            svc.record(now, now - self.clients[c].issued_at);
        }
        let think = self.think.as_ref().map(|d| d.sample(&mut self.rng)).unwrap_or(0);
        if think > 0 {
            self.clients[c].replier = self.threads[slot as usize];
            eff.timers.push((now + think, wl, c as u32));
        } else if self.client_cpu.is_none() && self.delay.is_none() {
            // asks again at once, behind the requests already waiting
            svc.started += 1;
            self.clients[c].issued_at = now;
            if let Some(p) = self.pool.as_mut() {
                p.enqueue(c);
            }
        } else {
            self.ready(c, now, wl, Some(slot), eff, svc);
        }
    }

    /// Worker `slot` of the pool is free: it takes the oldest waiting request, or goes idle.
    fn next_request(&mut self, slot: u32, eff: &mut Effects) -> Next {
        let Some(pool) = self.pool.as_mut() else {
            return Next::Sleep;
        };
        match pool.next_for(slot) {
            Some(next) => {
                pool.serving[slot as usize] = next;
                pool.start_pass(slot);
                let work = self.service.sample(&mut self.rng).max(1);
                // the request, run on into
                self.request_to(next, self.threads[slot as usize], eff);
                Next::Compute(first_burst(&mut self.shape, slot as usize, work))
            }
            None => {
                pool.idle.push(slot);
                Next::Sleep
            }
        }
    }

    /// Client `c` is ready to ask again: its generator task first spends the request's CPU
    /// (and sends it when done, `on_done`), or without one it sends it now.
    fn ready(
        &mut self,
        c: usize,
        now: Ns,
        wl: usize,
        me: Option<u32>,
        eff: &mut Effects,
        svc: &mut ServiceStats,
    ) -> Option<u64> {
        let Some(work) = self.ask_again(c, now, svc) else {
            return self.after_client(c, now, wl, me, eff);
        };
        // the reply of the thread that finished the request last (after a think, the one
        // recorded when it finished: the reply was read then, its cost is paid now)
        if let Some(k) = me {
            self.clients[c].replier = self.threads[k as usize];
        }
        if let Some(ev) = self.ev.as_mut() {
            // the reply waits on the thread's ready list for a pass that reads it (its latency
            // ends there); the read re-arms the next request's write for a later pass
            self.clients[c].gen_work = work;
            if let Some(step) = ev.reply(c) {
                let g = ev.owner(c);
                let part = self.step_work(g, step, now, eff);
                eff.wakes.push((self.generator[g], part));
            }
            return None;
        }
        self.hand_to_generator(c, work, eff);
        None
    }

    /// Client `c` asks again now (counted, its latency timed from now): its generator's CPU
    /// for the request, drawn — the first part with rounds (an event loop has none) — or None
    /// when the clients cost no CPU.
    fn ask_again(&mut self, c: usize, now: Ns, svc: &mut ServiceStats) -> Option<u64> {
        svc.started += 1;
        self.clients[c].issued_at = now;
        let work = self.client_cpu.as_ref()?.sample(&mut self.rng).max(1);
        Some(self.rounds.as_mut().map_or(work, |r| r.client.start(c, work)))
    }

    /// Client `c`'s generator finished a part of its CPU: after the first, the request goes
    /// out (`after_client`); after a later one, the server's threads run their next round —
    /// or, streamed, the round is over once the server's threads are done too. Some: what the
    /// generator's task (a task per client: no pool) does next, when it decided.
    fn client_part_done(
        &mut self,
        c: usize,
        now: Ns,
        wl: usize,
        eff: &mut Effects,
        svc: &mut ServiceStats,
    ) -> Option<Next> {
        match self.rounds.as_mut() {
            Some(r) if r.stream && !r.first_round_done(c) => {
                self.clients[c].outstanding -= 1;
                if self.clients[c].outstanding > 0 {
                    return Some(Next::Sleep);
                }
                let g = self.generator[c];
                return Some(match self.next_stream_round(c, g, eff) {
                    Some(part) => Next::Compute(part),
                    None => self.complete(c, now, wl, None, eff, svc),
                });
            }
            Some(r) if !r.first_round_done(c) => {
                self.clients[c].outstanding = self.fanout;
                for k in 0..self.fanout {
                    let slot = c * self.fanout as usize + k as usize;
                    eff.wakes.push((self.threads[slot], r.server.take(slot)));
                }
                for k in 0..self.fanout as usize {
                    self.request_to(c, self.threads[c * self.fanout as usize + k], eff);
                }
            }
            // (without `me`, send wakes every thread the request needs and returns None)
            _ => {
                self.after_client(c, now, wl, None, eff);
            }
        }
        None
    }

    /// A streamed round of client `c` is over (every party done; `last` finished it): the
    /// next round's parts all start, `last` running on into its own (returned) and waking
    /// the others — the client reads the server's block, or the server threads find the
    /// client ready for the next. None when no round is left: the request is complete.
    fn next_stream_round(&mut self, c: usize, last: TaskId, eff: &mut Effects) -> Option<u64> {
        let r = self.rounds.as_mut()?;
        if r.client.left(c) == 0 {
            return None;
        }
        let client_part = r.client.take(c);
        let gen = self.generator[c];
        let mut mine = None;
        self.clients[c].outstanding = self.fanout + 1;
        if last == gen {
            mine = Some(client_part);
        } else {
            self.clients[c].replier = last;
            self.reply_to(c, gen, eff);
            eff.wakes.push((gen, client_part));
        }
        for k in 0..self.fanout as usize {
            let slot = c * self.fanout as usize + k;
            let part = self.rounds.as_mut().map_or(1, |r| r.server.take(slot));
            let t = self.threads[slot];
            if t == last {
                mine = Some(part);
                continue;
            }
            if last == gen {
                self.request_to(c, t, eff);
            }
            eff.wakes.push((t, part));
        }
        mine
    }

    /// Client `c`'s request is complete, its last part run by server thread `slot` (None: by
    /// the client's own generator task, in a streamed exchange): its latency is recorded (an
    /// event loop's ends where its generator reads the reply), and the client thinks or asks
    /// again; what that task does next.
    fn complete(
        &mut self,
        c: usize,
        now: Ns,
        wl: usize,
        slot: Option<u32>,
        eff: &mut Effects,
        svc: &mut ServiceStats,
    ) -> Next {
        if self.ev.is_none() {
            svc.record(now, now - self.clients[c].issued_at);
        }
        let think = self.think.as_ref().map(|d| d.sample(&mut self.rng)).unwrap_or(0);
        if think > 0 {
            // (the reply's sender, whose message the client reads when it asks again)
            self.clients[c].replier = slot.map_or_else(|| self.generator[c], |k| self.threads[k as usize]);
            eff.timers.push((now + think, wl, c as u32));
            return Next::Sleep;
        }
        if slot.is_none() {
            // the client's own task asks again at once: it runs on into the next request's CPU
            // (a streamed exchange has rounds, so client_cpu: spec.rs validate_rounds)
            let work = self.ask_again(c, now, svc).expect("rounds > 1 have client_cpu");
            return Next::Compute(work);
        }
        match self.ready(c, now, wl, slot, eff, svc) {
            Some(w) => Next::Compute(w),
            None => Next::Sleep,
        }
    }

    /// Every server thread of client `c` finished its part of a round: the client runs its
    /// next part, or None when the request is complete (no rounds left).
    fn next_client_part(&mut self, c: usize, from: TaskId, eff: &mut Effects) -> Option<()> {
        let r = self.rounds.as_mut()?;
        if r.client.left(c) == 0 {
            return None;
        }
        let part = r.client.take(c);
        self.clients[c].replier = from;
        // on the client's own task, or on the pool's next free thread
        self.hand_to_generator(c, part, eff);
        Some(())
    }

    /// Whether client `c`'s request, sent now, reaches a thread on another CPU than its
    /// sender's: with `cross_cpu`, only such a request waits its `delay` (the wakeup of
    /// another CPU); a request to a busy pool waits in its queue instead. Without `cross_cpu`
    /// every request waits it.
    fn crosses(&self, c: usize) -> bool {
        let Some(x) = &self.cross else { return true };
        let n = self.threads.len();
        let Some(&from) = self.clients[c].sender.checked_add(n).and_then(|i| x.cpu_of.get(i)) else {
            return true;
        };
        match &self.pool {
            Some(p) => p.free_for(c).is_some_and(|w| x.cpu_of[w as usize] != from),
            None => (0..self.fanout as usize).any(|k| x.cpu_of[c * self.fanout as usize + k] != from),
        }
    }

    /// Client `c`'s CPU for its request is done: the request waits its delay, or goes out.
    fn after_client(&mut self, c: usize, now: Ns, wl: usize, me: Option<u32>, eff: &mut Effects) -> Option<u64> {
        if self.delay.is_some() && !self.crosses(c) {
            // (sent from the generator's on_done: the node places it as its wakeup)
            return self.send(c, me, eff);
        }
        if let Some(d) = &self.delay {
            let wait = d.sample(&mut self.rng).max(1);
            eff.timers.push((now + wait, wl, DELAY_DONE + c as u32));
            return None;
        }
        self.send(c, me, eff)
    }

    /// Client `c`'s request reaches the server: its threads (or a worker of the pool) serve it.
    fn send(&mut self, c: usize, me: Option<u32>, eff: &mut Effects) -> Option<u64> {
        self.clients[c].outstanding = self.fanout;
        if let Some(pool) = self.pool.as_mut() {
            match pool.take_for(c) {
                Some(w) => {
                    pool.serving[w as usize] = c;
                    pool.start_pass(w);
                    let work = self.service.sample(&mut self.rng).max(1);
                    let work = first_burst(&mut self.shape, w as usize, work);
                    eff.wakes.push((self.threads[w as usize], work));
                    self.request_to(c, self.threads[w as usize], eff);
                }
                None => pool.enqueue(c),
            }
            return None;
        }
        let mut mine = None;
        for k in 0..self.fanout {
            let slot = c as u32 * self.fanout + k;
            let work = self.service.sample(&mut self.rng).max(1);
            let work = match self.rounds.as_mut() {
                Some(r) => r.server.start(slot as usize, work),
                None => first_burst(&mut self.shape, slot as usize, work),
            };
            self.request_to(c, self.threads[slot as usize], eff);
            if Some(slot) == me {
                mine = Some(work);
            } else {
                eff.wakes.push((self.threads[slot as usize], work));
            }
        }
        mine
    }
}

impl Workload {
    pub fn on_timer(&mut self, wl: usize, slot: u32, now: Ns, eff: &mut Effects, services: &mut [ServiceStats]) {
        match self {
            Workload::Hog(h) => {
                debug_assert_eq!(slot, START);
                eff.forks.extend(h.threads.iter().map(|&t| (t, FOREVER)));
            }
            Workload::Dd(d) => {
                if slot == START {
                    for k in 0..d.threads.len() {
                        d.issued_at[k] = now;
                        eff.forks.push((d.threads[k], d.cpu_ns));
                    }
                    return;
                }
                // a block's IO completed
                let k = (slot - DISK_DONE) as usize;
                services[d.svc].record(now, now - d.issued_at[k]);
                if let Some(left) = d.left[k].as_mut() {
                    *left -= 1;
                    if *left == 0 {
                        return;
                    }
                }
                d.issued_at[k] = now;
                eff.wakes.push((d.threads[k], d.cpu_ns));
            }
            Workload::Database(db) => {
                let svc = db.svc;
                if slot == START {
                    for c in 0..db.clients.len() {
                        if let Some(work) = db.issue(c, now, eff, &mut services[svc]) {
                            eff.wakes.push((db.threads[c], work));
                        }
                    }
                } else if slot >= DISK_DONE {
                    let c = (slot - DISK_DONE) as usize;
                    db.left[c] -= 1;
                    if db.left[c] > 0 {
                        db.read(c, eff);
                    } else {
                        let work = db.service.sample(&mut db.rng).max(1);
                        eff.wakes.push((db.threads[c], work));
                    }
                } else if let Some(work) = db.issue(slot as usize, now, eff, &mut services[svc]) {
                    eff.wakes.push((db.threads[slot as usize], work));
                }
            }
            Workload::Iperf(p) => {
                if slot == START {
                    for (i, &(a, b)) in p.windows.iter().enumerate() {
                        eff.timers.push((a.max(now), wl, 2 * i as u32));
                        if b != Ns::MAX {
                            eff.timers.push((b.max(now), wl, 2 * i as u32 + 1));
                        }
                    }
                    return;
                }
                let on = slot.is_multiple_of(2);
                eff.net.extend(p.flows.iter().map(|&f| (f, on)));
            }
            Workload::ClosedLoop(cl) => {
                let svc = cl.svc;
                if let Some(k) = wait_over(slot) {
                    let part = cl.shape.as_mut().expect("a wait timer is shaped").resume(k as usize);
                    eff.wakes.push((cl.threads[k as usize], part));
                } else if slot == START && cl.ev.is_some() {
                    cl.start_event_loop(now, eff, &mut services[svc]);
                } else if slot == START {
                    for c in 0..cl.clients.len() {
                        cl.ready(c, now, wl, None, eff, &mut services[svc]);
                    }
                } else if slot >= DELAY_DONE {
                    let c = (slot - DELAY_DONE) as usize;
                    // with cross_cpu (where the model tells a local exchange from one across
                    // CPUs) placed as its sender's wakeup; without, as a timer's
                    eff.sent_by = Some(cl.sender_task(c)).filter(|&t| t != usize::MAX && cl.cross.is_some());
                    cl.send(c, None, eff);
                } else {
                    cl.ready(slot as usize, now, wl, None, eff, &mut services[svc]);
                }
            }
            Workload::Duty(d) => {
                // every period: each idle thread gets its share; a busy one keeps what it has
                for k in 0..d.threads.len() {
                    let work = d.share(k);
                    if d.busy[k] {
                        d.pending[k] = work;
                    } else if work > 0 {
                        d.busy[k] = true;
                        eff.wakes.push((d.threads[k], work));
                    }
                }
                eff.timers.push((now + d.period, wl, 0));
            }
            Workload::Analytics(a) => {
                debug_assert_eq!(slot, START);
                for k in 0..a.threads.len() {
                    let work = a.next(k, now, eff, &mut services[a.svc]);
                    eff.forks.push((a.threads[k], work));
                }
            }
            Workload::CacheWriter(_) if slot == WRITTEN => {}
            Workload::CacheWriter(w) => {
                debug_assert_eq!(slot, START);
                for k in 0..w.threads.len() {
                    let work = w.next_chunk(k, eff);
                    eff.forks.push((w.threads[k], work));
                }
            }
            Workload::FileServer(f) => {
                let svc = f.svc;
                if slot == START {
                    for c in 0..f.clients.len() {
                        if let Some(work) = f.issue(c, now, wl, eff, &mut services[svc]) {
                            eff.wakes.push((f.threads[c], work));
                        }
                    }
                } else if slot >= DISK_DONE {
                    // the file is read: it is in the cache now, and the request takes its CPU
                    let c = (slot - DISK_DONE) as usize;
                    if let Some(s) = f.space {
                        eff.cache.push((f.threads[c], CacheOp::Fill(s, f.reading[c], true)));
                    }
                    let work = f.service.sample(&mut f.rng).max(1);
                    eff.wakes.push((f.threads[c], work));
                } else if let Some(work) = f.issue(slot as usize, now, wl, eff, &mut services[svc]) {
                    // a client's think time is over
                    eff.wakes.push((f.threads[slot as usize], work));
                }
            }
            Workload::MemoryHog(m) => {
                if slot == START {
                    for k in 0..m.threads.len() {
                        let work = m.next_chunk(k, eff);
                        eff.forks.push((m.threads[k], work));
                    }
                } else {
                    // a hanging worker wakes: it frees everything and starts over
                    let k = slot as usize;
                    m.free_all(k, eff);
                    let work = m.next_chunk(k, eff);
                    eff.wakes.push((m.threads[k], work));
                }
            }
            Workload::Bursty(b) => {
                if slot == START {
                    eff.forks.extend(b.steady.iter().map(|&t| (t, FOREVER)));
                } else if b.outstanding > 0 {
                    b.pending = true;
                } else {
                    b.spell(now, eff, &mut services[b.svc]);
                }
                // Spells are periodic from the start (the first one `every` after it), so they
                // keep their phase whatever throttling does to them.
                eff.timers.push((now + b.every, wl, SPELL));
            }
            Workload::OpenLoop(ol) => {
                if let Some(k) = wait_over(slot) {
                    let part = ol.shape.as_mut().expect("a wait timer is shaped").resume(k as usize);
                    eff.wakes.push((ol.workers[k as usize], part));
                    return;
                }
                // Every other timer of an open loop is an arrival (the start timer is the
                // first). It never finds the backlog full: arrivals stop while it is
                // (`full_since`).
                let stats = &mut services[ol.svc];
                stats.started += 1;
                if let Some(w) = ol.idle.pop() {
                    ol.serving[w as usize] = now;
                    let work = ol.service.sample(&mut ol.rng).max(1);
                    let work = first_burst(&mut ol.shape, w as usize, work);
                    eff.wakes.push((ol.workers[w as usize], work));
                } else {
                    ol.queue.push_back(now);
                }
                if ol.full() {
                    ol.full_since = Some(now);
                } else {
                    ol.arm(now, wl, eff);
                }
            }
        }
    }

    /// Task `slot` of this workload has finished its CPU work at `now`.
    pub fn on_done(&mut self, wl: usize, slot: u32, now: Ns, eff: &mut Effects, services: &mut [ServiceStats]) -> Next {
        match self {
            Workload::Hog(_) => Next::Compute(FOREVER),
            // a thread's block CPU is done: its IO goes out, and it waits for it
            Workload::Dd(d) => {
                d.io(slot as usize, eff);
                Next::Sleep
            }
            Workload::Database(db) => {
                let c = slot as usize;
                services[db.svc].record(now, now - db.clients[c].issued_at);
                let think = db.think.as_ref().map(|d| d.sample(&mut db.rng)).unwrap_or(0);
                if think > 0 {
                    eff.timers.push((now + think, wl, c as u32));
                    return Next::Sleep;
                }
                let svc = db.svc;
                match db.issue(c, now, eff, &mut services[svc]) {
                    Some(work) => Next::Compute(work),
                    None => Next::Sleep,
                }
            }
            Workload::Iperf(_) => Next::Sleep,
            Workload::CacheWriter(w) => Next::Compute(w.next_chunk(slot as usize, eff)),
            Workload::Duty(d) => {
                let k = slot as usize;
                let next = std::mem::take(&mut d.pending[k]);
                if next > 0 {
                    return Next::Compute(next);
                }
                d.busy[k] = false;
                Next::Sleep
            }
            Workload::Analytics(a) => {
                let k = slot as usize;
                if a.task_running[k] {
                    services[a.svc].record(now, now - a.started_at[k]);
                }
                Next::Compute(a.next(k, now, eff, &mut services[a.svc]))
            }
            Workload::FileServer(f) => {
                let c = slot as usize;
                services[f.svc].record(now, now - f.clients[c].issued_at);
                let think = f.think.as_ref().map(|d| d.sample(&mut f.rng)).unwrap_or(0);
                if think > 0 {
                    eff.timers.push((now + think, wl, c as u32));
                    return Next::Sleep;
                }
                let svc = f.svc;
                match f.issue(c, now, wl, eff, &mut services[svc]) {
                    Some(work) => Next::Compute(work),
                    None => Next::Sleep,
                }
            }
            Workload::MemoryHog(m) => {
                let k = slot as usize;
                if m.held[k] < m.bytes {
                    return Next::Compute(m.next_chunk(k, eff));
                }
                match m.mode {
                    // --vm-keep: keeps re-dirtying what it holds
                    crate::spec::HogMode::Keep => Next::Compute(FOREVER),
                    crate::spec::HogMode::Hang => {
                        eff.timers.push((now + m.hang_ns, wl, slot));
                        Next::Sleep
                    }
                    crate::spec::HogMode::Churn => {
                        m.free_all(k, eff);
                        Next::Compute(m.next_chunk(k, eff))
                    }
                }
            }
            Workload::ClosedLoop(cl) if slot as usize >= cl.threads.len() => {
                // a generator task has done a client's request CPU: it sends it and waits, or
                // (a pool's thread) takes the next client's
                let svc = cl.svc;
                cl.generator_done(slot as usize - cl.threads.len(), now, wl, eff, &mut services[svc])
            }
            Workload::ClosedLoop(cl) if cl.pool.is_some() => {
                if let Some(next) = between_bursts(&mut cl.shape, slot, now, wl, &mut cl.rng, eff) {
                    return next;
                }
                // A worker finished a request: the clients it replies to now (this one, or a
                // pass's) think or ask again (joining the queue), and the worker takes the next
                // request of its pass, or the oldest waiting one, if any.
                let svc = cl.svc;
                let c = cl.pool.as_ref().map_or(0, |p| p.serving[slot as usize]);
                let mut replies = std::mem::take(&mut cl.replies);
                let pool = cl.pool.as_mut().expect("a pool");
                if let Some(next) = pool.finished(slot, c, &mut replies) {
                    pool.serving[slot as usize] = next;
                    cl.replies = replies;
                    let work = cl.service.sample(&mut cl.rng).max(1);
                    cl.request_to(next, cl.threads[slot as usize], eff);
                    return Next::Compute(first_burst(&mut cl.shape, slot as usize, work));
                }
                for &c in &replies {
                    cl.reply_done(c, slot, now, wl, eff, &mut services[svc]);
                }
                replies.clear();
                cl.replies = replies;
                cl.next_request(slot, eff)
            }
            Workload::ClosedLoop(cl) => {
                if let Some(next) = between_bursts(&mut cl.shape, slot, now, wl, &mut cl.rng, eff) {
                    return next;
                }
                let c = (slot / cl.fanout) as usize;
                let me = cl.threads[slot as usize];
                cl.clients[c].outstanding -= 1;
                if cl.clients[c].outstanding > 0 {
                    return Next::Sleep;
                }
                if cl.rounds.as_ref().is_some_and(|r| r.stream) {
                    if let Some(part) = cl.next_stream_round(c, me, eff) {
                        return Next::Compute(part);
                    }
                } else if cl.next_client_part(c, me, eff).is_some() {
                    return Next::Sleep;
                }
                let svc = cl.svc;
                cl.complete(c, now, wl, Some(slot), eff, &mut services[svc])
            }
            Workload::Bursty(b) => {
                if (slot as usize) < b.steady.len() {
                    return Next::Compute(FOREVER);
                }
                b.outstanding -= 1;
                if b.outstanding == 0 {
                    services[b.svc].record(now, now - b.issued_at);
                    if b.pending {
                        b.pending = false;
                        b.spell(now, eff, &mut services[b.svc]);
                        // This thread is one of the burst threads: it runs on instead of waking.
                        let me = b.burst[slot as usize - b.steady.len()];
                        if let Some(i) = eff.wakes.iter().position(|&(t, _)| t == me) {
                            let (_, work) = eff.wakes.swap_remove(i);
                            return Next::Compute(work);
                        }
                    }
                }
                Next::Sleep
            }
            Workload::OpenLoop(ol) => {
                if let Some(next) = between_bursts(&mut ol.shape, slot, now, wl, &mut ol.rng, eff) {
                    return next;
                }
                let w = slot as usize;
                services[ol.svc].record(now, now - ol.serving[w]);
                let next = if let Some(arrived) = ol.queue.pop_front() {
                    ol.serving[w] = arrived;
                    let work = ol.service.sample(&mut ol.rng).max(1);
                    Next::Compute(first_burst(&mut ol.shape, w, work))
                } else {
                    ol.idle.push(slot);
                    Next::Sleep
                };
                // Room again: what arrived while it was full was dropped; arrivals resume.
                if ol.full_since.is_some() {
                    ol.settle_drops(now, &mut services[ol.svc]);
                    ol.full_since = None;
                    ol.arm(now, wl, eff);
                }
                next
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    /// One client reading one 1 MiB file of which `resident` bytes are cached; its private
    /// disk: 100 µs + 1 byte/ns.
    fn server(resident: u64, node_disk: bool) -> FileServer {
        let mut pc = crate::lru::PageCache::new(&[None]);
        let space = pc.register(0, 1, 1024 * KIB);
        FileServer {
            svc: 0,
            cg: 0,
            threads: vec![0],
            clients: vec![Client::new()],
            service: Dist::Constant { value_ns: 100_000 },
            think: None,
            rng: Rng::new(1),
            working_set: 1024 * KIB,
            file_bytes: 1024 * KIB,
            disk_ns: 100_000 + 1024 * KIB,
            disk_latency_ns: 100_000,
            disk_free_at: 0,
            cached: resident,
            hits: 0,
            misses: 0,
            space: Some(space),
            resident: vec![resident],
            seen_epoch: None,
            reading: vec![0],
            node_disk,
        }
    }

    /// A file 3/4 cached is a miss (not every page resident, as mincore says) whose read
    /// costs its missing quarter on the disk: 256 KiB on the node's disk, or the private
    /// disk's latency + 256 KiB at 1 byte/ns; a whole file is a hit with no IO.
    #[test]
    fn a_partly_cached_file_reads_only_its_missing_pages() {
        let mut svc = ServiceStats::default();
        let mut f = server(768 * KIB, true);
        let mut eff = Effects::default();
        assert_eq!(f.issue(0, 0, 0, &mut eff, &mut svc), None);
        assert_eq!((f.hits, f.misses, eff.io.len()), (0, 1, 1));
        assert_eq!(eff.io[0].1.bytes, 256 * KIB);
        let mut f = server(768 * KIB, false);
        let mut eff = Effects::default();
        assert_eq!(f.issue(0, 0, 0, &mut eff, &mut svc), None);
        assert_eq!(eff.timers, vec![(100_000 + 256 * KIB, 0, DISK_DONE)]);
        let mut f = server(1024 * KIB, true);
        let mut eff = Effects::default();
        assert_eq!(f.issue(0, 0, 0, &mut eff, &mut svc), Some(100_000));
        assert!(eff.io.is_empty() && eff.timers.is_empty() && f.hits == 1);
    }
}
