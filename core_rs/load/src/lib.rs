//! colosim-load: one simulated workload, run for real on the host.
//!
//! A library so that it runs two ways with one code: the `colosim-load` binary (cargo,
//! `make setup`), and `sim._core.load_main` behind the `colosim-load` console script that a
//! pip-installed colosim has (a wheel carries no second binary).
//!
//! It takes the very workload document the core takes (`colosim_core::spec::WorkloadSpec`) and
//! executes it with the core's own distributions and random streams: a request's service time
//! is burnt as *CPU time of the thread* (CLOCK_THREAD_CPUTIME_ID), so waiting for a CPU,
//! throttling and preemption stretch its latency exactly as they do in the model, where
//! service times are CPU work. Latencies are measured from issue (closed loop, spell) or
//! arrival (open loop) to completion with CLOCK_MONOTONIC.
//!
//! ```text
//! colosim-load --spec '{"kind":"hog",...}' --seed 1 --duration-ns 10000000000 --out r.json
//! colosim-load --slice-ns 300000 --spec ... # its threads run with a 0.3 ms EEVDF slice
//! colosim-load --slice-ns 300000 -- nginx -c ...   # sets its own slice, then execs nginx
//! ```
//!
//! `--slice-ns N` sets the process's custom EEVDF slice (sched_attr.sched_runtime, Linux 6.12+)
//! on its main thread before any other thread starts; the kernel copies it into every thread
//! and child and keeps it across exec (src/slice.rs says where). With `-- ARGV...` it is a
//! wrapper: it sets the slice and execs ARGV, which is how replay gives a real server its slice.
//!
//! The output is JSON: started, completed, and per completed request its latency and its
//! completion time (CLOCK_MONOTONIC ns, the clock Python's time.monotonic_ns reads), so the
//! driver cuts the measured window itself. The process places nothing anywhere: the replay
//! driver puts it in its cgroups before exec.

use colosim_core::dist::Dist;
use colosim_core::rng::Rng;
use colosim_core::shape::{plan, Shape};
use colosim_core::spec::WorkloadSpec;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

pub mod slice;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own; both clocks exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Run on this thread until it has had `work` ns of CPU, or until the run stops.
/// Returns false if stopped first.
fn burn(work: u64, stop: &AtomicBool) -> bool {
    let start = thread_cpu_ns();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        // ~10 µs of arithmetic between clock reads keeps the clock's cost under 5%.
        for _ in 0..4096 {
            x = x.rotate_left(7).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x1234_5678;
        }
        std::hint::black_box(x);
        if thread_cpu_ns() - start >= work {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
    }
}

/// Run one request's CPU of `total` on this thread in its shape's bursts, sleeping the drawn
/// wait between two (off the CPU, as the simulated thread is: `thread::sleep`, nanosleep),
/// the core's own split and draws (`colosim_core::shape::plan`). False if stopped first.
fn serve(total: u64, shape: &Option<Shape>, rng: &mut Rng, stop: &AtomicBool) -> bool {
    for (part, wait) in plan(total, shape, rng) {
        if !burn(part, stop) || (wait > 0 && !sleep_until(mono_ns() + wait, stop)) {
            return false;
        }
    }
    true
}

fn sleep_until(t: u64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = mono_ns();
        if now >= t {
            return true;
        }
        thread::sleep(Duration::from_nanos((t - now).min(50_000_000)));
    }
}

#[derive(Default)]
struct Record {
    started: u64,
    latencies: Vec<u64>,
    completions: Vec<u64>,
    /// A file server's requests, in completion order: whether each found its whole file in
    /// the page cache (empty for other kinds).
    hits: Vec<bool>,
}

impl Record {
    fn done(&mut self, issued: u64) {
        let now = mono_ns();
        self.latencies.push(now - issued);
        self.completions.push(now);
    }

    fn merge(&mut self, other: Record) {
        self.started += other.started;
        self.latencies.extend(other.latencies);
        self.completions.extend(other.completions);
        self.hits.extend(other.hits);
    }
}

/// Whether every page of `file`'s first `size` bytes is in the page cache, asked without
/// touching them: mincore(2) over a read-only shared mapping reports residency per page and
/// faults nothing in (util-linux fincore asks the same way).
///
/// RWF_NOWAIT reads cannot tell this: since Linux 5.8 preadv2(RWF_NOWAIT) also sets IOCB_NOIO,
/// so a cached page that carries the readahead marker (PG_readahead), or one still locked by
/// an async readahead that a previous read started, fails with EAGAIN (mm/filemap.c
/// filemap_get_pages / filemap_readahead). On a loaded host that made whole-cache reads count
/// as misses.
fn resident(file: &std::fs::File, size: u64) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    if size == 0 {
        return Ok(true);
    }
    let len = size as usize;
    // SAFETY: a fresh read-only mapping of our own open file; unmapped below on every path.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `vec` has one byte per page of the mapping, as mincore(2) requires.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: `addr`/`len` are the mapping made above.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    Ok(vec.iter().all(|b| b & 1 == 1))
}

/// Read all of `file` (`size` bytes) through the page cache, faulting in what is not there and
/// charging it to this process's memory cgroup; whether every byte was already cached before
/// the read (a hit) or some had to come from the disk (a miss).
fn read_file(file: &std::fs::File, size: u64, buf: &mut [u8]) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let cached = resident(file, size)?;
    let mut off = 0u64;
    while off < size {
        let want = (size - off).min(buf.len() as u64) as usize;
        let n = file.read_at(&mut buf[..want], off)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file shorter than file_bytes",
            ));
        }
        off += n as u64;
    }
    Ok(cached)
}

/// A file server (nginx serving static files): `clients` closed-loop clients, each request
/// reads one file picked uniformly from `files` (the working set, each `size` bytes) through
/// the page cache, then takes its CPU (`service`), then the client thinks. A request's latency
/// counts from issue to the end of its CPU, the disk read of a miss included.
fn file_server(
    run: &Run,
    seed: u64,
    files: Arc<Vec<std::fs::File>>,
    size: u64,
    clients: u32,
    service: Dist,
    think: Option<Dist>,
) -> Record {
    let mut handles = Vec::new();
    for c in 0..clients {
        let (stop, start, files, service, think) = (
            run.stop.clone(),
            run.start,
            files.clone(),
            service.clone(),
            think.clone(),
        );
        handles.push(thread::spawn(move || {
            let mut rng = Rng::stream(seed, 1_000 + c as u64);
            let mut rec = Record::default();
            let mut buf = vec![0u8; size.min(1 << 20) as usize];
            if sleep_until(start, &stop) {
                loop {
                    let issued = mono_ns();
                    rec.started += 1;
                    let i = ((rng.uniform() * files.len() as f64) as usize).min(files.len() - 1);
                    let hit = match read_file(&files[i], size, &mut buf) {
                        Ok(hit) => hit,
                        Err(e) => {
                            eprintln!("colosim-load: error: reading file {i}: {e}");
                            std::process::exit(1);
                        }
                    };
                    if !serve(service.sample(&mut rng).max(1), &None, &mut rng, &stop) {
                        break;
                    }
                    rec.done(issued);
                    rec.hits.push(hit);
                    let pause = think.as_ref().map(|d| d.sample(&mut rng)).unwrap_or(0);
                    if pause > 0 && !sleep_until(mono_ns() + pause, &stop) {
                        break;
                    }
                }
            }
            rec
        }));
    }
    let mut rec = Record::default();
    for h in handles {
        rec.merge(h.join().unwrap_or_default());
    }
    rec
}

/// The working set of a file server: `working_set / size` files named f-0, f-1, … in `dir`
/// (made by the replay driver before the run, and dropped from the page cache).
fn open_files(dir: &str, working_set: u64, size: u64) -> Result<Vec<std::fs::File>, String> {
    let n = (working_set / size.max(1)).max(1);
    (0..n)
        .map(|i| {
            let path = format!("{dir}/f-{i}");
            std::fs::File::open(&path).map_err(|e| format!("--files: {path}: {e}"))
        })
        .collect()
}

struct Run {
    stop: Arc<AtomicBool>,
    start: u64,
}

/// CPU hogs: threads that never sleep (`stress --cpu N`).
fn hog(run: &Run, threads: u32) -> Record {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let stop = run.stop.clone();
            let start = run.start;
            thread::spawn(move || {
                if sleep_until(start, &stop) {
                    burn(u64::MAX, &stop);
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    Record::default()
}

/// A duty cycle at a constant `cores` (model `workload.rs` Duty): thread k burns
/// min(1, cores − k) of every period's CPU from the period's start, then sleeps to the next
/// boundary. A share not done by the boundary runs on and the next period's follows it at
/// once; boundaries missed meanwhile are dropped (one period's share at most: an unmet demand
/// does not pile up), as the model's `pending`. A thread with no share sleeps to the end.
fn duty(run: &Run, threads: u32, cores: f64, period: u64) -> Record {
    let period = period.max(1);
    let handles: Vec<_> = (0..threads)
        .map(|k| {
            let stop = run.stop.clone();
            let start = run.start;
            let share = ((cores - f64::from(k)).clamp(0.0, 1.0) * period as f64).round() as u64;
            thread::spawn(move || {
                if !sleep_until(start, &stop) || share == 0 {
                    sleep_until(u64::MAX, &stop);
                    return;
                }
                let mut next = start;
                loop {
                    if !burn(share, &stop) {
                        return;
                    }
                    next += period;
                    let now = mono_ns();
                    if now < next {
                        if !sleep_until(next, &stop) {
                            return;
                        }
                    } else {
                        // late: the share pending from the boundary just missed runs at once,
                        // and the grid goes on from the last boundary passed
                        next += (now - next) / period * period;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    Record::default()
}

/// Closed loop: each client issues a request that fans out to `fanout` threads (the client's
/// own thread is one of them) and completes when all have burnt their sampled work (in its
/// shape's bursts and waits, each thread drawing its waits from its own stream).
fn closed_loop(run: &Run, seed: u64, spec: LoopSpec, clients: u32, fanout: u32, think: Option<Dist>) -> Record {
    let mut handles = Vec::new();
    for c in 0..clients {
        let stop = run.stop.clone();
        let start = run.start;
        let (LoopSpec { service, shape }, think) = (spec.clone(), think.clone());
        handles.push(thread::spawn(move || {
            let mut rng = Rng::stream(seed, 1_000 + c as u64);
            let (done_tx, done_rx) = mpsc::channel::<bool>();
            let mut helpers = Vec::new();
            let mut work_txs = Vec::new();
            for k in 1..fanout {
                let (tx, rx) = mpsc::channel::<u64>();
                let (done_tx, stop, shape) = (done_tx.clone(), stop.clone(), shape.clone());
                let mut waits = Rng::stream(seed, HELPER_STREAMS + (c as u64) * fanout as u64 + k as u64);
                helpers.push(thread::spawn(move || {
                    while let Ok(work) = rx.recv() {
                        let _ = done_tx.send(serve(work, &shape, &mut waits, &stop));
                    }
                }));
                work_txs.push(tx);
            }
            let mut rec = Record::default();
            if sleep_until(start, &stop) {
                loop {
                    let issued = mono_ns();
                    rec.started += 1;
                    let mine = service.sample(&mut rng).max(1);
                    for tx in &work_txs {
                        let _ = tx.send(service.sample(&mut rng).max(1));
                    }
                    let mut ok = serve(mine, &shape, &mut rng, &stop);
                    for _ in &work_txs {
                        ok &= done_rx.recv().unwrap_or(false);
                    }
                    if !ok {
                        break;
                    }
                    rec.done(issued);
                    let pause = think.as_ref().map(|d| d.sample(&mut rng)).unwrap_or(0);
                    if pause > 0 && !sleep_until(mono_ns() + pause, &stop) {
                        break;
                    }
                }
            }
            drop(work_txs);
            for h in helpers {
                let _ = h.join();
            }
            rec
        }));
    }
    let mut rec = Record::default();
    for h in handles {
        rec.merge(h.join().unwrap_or_default());
    }
    rec
}

/// Open loop: Poisson arrivals at `rate` into a FIFO queue served by `workers` threads; the
/// latency counts from arrival, queueing included.
fn open_loop(run: &Run, seed: u64, spec: LoopSpec, rate: f64, workers: u32) -> Record {
    let queue = Arc::new((Mutex::new(VecDeque::<u64>::new()), Condvar::new()));
    let mut handles = Vec::new();
    for w in 0..workers {
        let (queue, stop, LoopSpec { service, shape }) = (queue.clone(), run.stop.clone(), spec.clone());
        handles.push(thread::spawn(move || {
            let mut rng = Rng::stream(seed, 2_000 + w as u64);
            let mut rec = Record::default();
            loop {
                let arrived = {
                    let (lock, cv) = &*queue;
                    let mut q = lock.lock().unwrap();
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return rec;
                        }
                        if let Some(a) = q.pop_front() {
                            break a;
                        }
                        q = cv.wait_timeout(q, Duration::from_millis(50)).unwrap().0;
                    }
                };
                let total = service.sample(&mut rng).max(1);
                if !serve(total, &shape, &mut rng, &stop) {
                    return rec;
                }
                rec.done(arrived);
            }
        }));
    }
    let mut rng = Rng::stream(seed, 1);
    let mean_gap = 1e9 / rate;
    let mut started = 0;
    let mut next = run.start;
    while sleep_until(next, &run.stop) {
        let (lock, cv) = &*queue;
        lock.lock().unwrap().push_back(next);
        cv.notify_one();
        started += 1;
        next += rng.exponential(mean_gap).round().max(1.0) as u64;
    }
    let mut rec = Record {
        started,
        ..Record::default()
    };
    for h in handles {
        let r = h.join().unwrap_or_default();
        rec.latencies.extend(r.latencies);
        rec.completions.extend(r.completions);
    }
    rec
}

/// Bursty: steady threads that never sleep, and every `every` a spell in which each burst
/// thread burns `length`; a spell that falls due while one runs starts when it ends (the
/// core's `pending`), and spells keep their phase.
fn bursty(run: &Run, steady: u32, burst: u32, every: u64, length: u64) -> Record {
    let mut handles = Vec::new();
    for _ in 0..steady {
        let (stop, start) = (run.stop.clone(), run.start);
        handles.push(thread::spawn(move || {
            if sleep_until(start, &stop) {
                burn(u64::MAX, &stop);
            }
        }));
    }
    let (done_tx, done_rx) = mpsc::channel::<bool>();
    let mut work_txs = Vec::new();
    for _ in 0..burst {
        let (tx, rx) = mpsc::channel::<u64>();
        let (done_tx, stop) = (done_tx.clone(), run.stop.clone());
        handles.push(thread::spawn(move || {
            while let Ok(work) = rx.recv() {
                let _ = done_tx.send(burn(work, &stop));
            }
        }));
        work_txs.push(tx);
    }
    let mut rec = Record::default();
    let mut next = run.start + every;
    let mut pending = false;
    loop {
        if !pending && !sleep_until(next, &run.stop) {
            break;
        }
        let issued = mono_ns();
        while next <= issued {
            next += every;
        }
        rec.started += 1;
        for tx in &work_txs {
            let _ = tx.send(length);
        }
        let mut ok = true;
        for _ in &work_txs {
            ok &= done_rx.recv().unwrap_or(false);
        }
        if !ok {
            break;
        }
        rec.done(issued);
        let end = mono_ns();
        pending = next <= end;
        while next <= end {
            next += every;
        }
    }
    drop(work_txs);
    for h in handles {
        let _ = h.join();
    }
    rec
}

/// What a closed or open loop's threads run per request: its CPU and the shape it comes in.
#[derive(Clone)]
struct LoopSpec {
    service: Dist,
    shape: Option<Shape>,
}

/// Random streams of a closed loop's fanout helper threads (their waits) start here, clear
/// of the clients' (1_000 + c) and the open loop's (1, 2_000 + w).
const HELPER_STREAMS: u64 = 1 << 32;

struct Args {
    spec: String,
    seed: u64,
    duration_ns: u64,
    out: Option<String>,
    files: Option<String>,
    /// --slice-ns: the custom EEVDF slice to set on ourselves first
    slice_ns: Option<u64>,
    /// after `--`: the program to exec (with its slice) instead of running a spec
    exec: Vec<String>,
}

const USAGE: &str =
    "[--slice-ns N] --spec JSON --duration-ns N [--seed N] [--out FILE] [--files DIR] | --slice-ns N -- PROGRAM [ARG...]";

fn parse_args(argv: Vec<String>) -> Result<Args, String> {
    let mut spec = None;
    let (mut seed, mut duration_ns, mut out, mut files, mut slice_ns) = (1, None, None, None, None);
    let mut it = argv.into_iter().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--" {
            let exec: Vec<String> = it.collect();
            if exec.is_empty() {
                return Err(format!("--: needs a program to run (usage: {USAGE})"));
            }
            let Some(ns) = slice_ns else {
                return Err("--: a wrapper needs --slice-ns (it sets nothing else)".into());
            };
            return Ok(Args {
                spec: String::new(),
                seed,
                duration_ns: 0,
                out,
                files,
                slice_ns: Some(ns),
                exec,
            });
        }
        let mut value = || it.next().ok_or(format!("{flag}: needs a value"));
        match flag.as_str() {
            "--slice-ns" => {
                let ns: u64 = value()?.parse().map_err(|e| format!("--slice-ns: {e}"))?;
                if ns == 0 {
                    return Err("--slice-ns: 0 is the base slice; give a custom slice in ns (the kernel clamps it to 100000..=100000000)".into());
                }
                slice_ns = Some(ns);
            }
            "--spec" => spec = Some(value()?),
            "--seed" => seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--duration-ns" => duration_ns = Some(value()?.parse().map_err(|e| format!("--duration-ns: {e}"))?),
            "--out" => out = Some(value()?),
            "--files" => files = Some(value()?),
            other => return Err(format!("unknown argument {other:?} (usage: {USAGE})")),
        }
    }
    Ok(Args {
        spec: spec.ok_or("--spec: required")?,
        seed,
        duration_ns: duration_ns.ok_or("--duration-ns: required")?,
        out,
        files,
        slice_ns,
        exec: Vec::new(),
    })
}

/// The whole command: `argv` as `std::env::args()` gives it (program name first); returns
/// the exit status (0, 1 if the result could not be written, 2 for a bad argument or spec,
/// 3 if the kernel refused or ignored --slice-ns, 127 if the program after `--` could not be
/// executed). Returns at the deadline (`--duration-ns` after the call) with the result written;
/// a wrapper (`--`) does not return when its exec succeeds.
pub fn run(argv: Vec<String>) -> u8 {
    let args = match parse_args(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("colosim-load: error: {e}");
            return 2;
        }
    };
    if let Some(ns) = args.slice_ns {
        // before any thread of ours starts: they inherit it from this one (src/slice.rs)
        if let Err(e) = slice::set_own(ns) {
            eprintln!("colosim-load: error: {e}");
            return 3;
        }
    }
    if let Some((program, rest)) = args.exec.split_first() {
        use std::os::unix::process::CommandExt;
        let e = std::process::Command::new(program).args(rest).exec();
        eprintln!("colosim-load: error: --: cannot execute {program:?}: {e}");
        return 127;
    }
    let spec: WorkloadSpec = match serde_json::from_str(&args.spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("colosim-load: error: --spec: {e}");
            return 2;
        }
    };
    let t0 = mono_ns();
    let stop = Arc::new(AtomicBool::new(false));
    {
        // The deadline: every thread checks `stop` between bursts of work.
        let stop = stop.clone();
        let end = t0 + args.duration_ns;
        thread::spawn(move || {
            let never = AtomicBool::new(false);
            sleep_until(end, &never);
            stop.store(true, Ordering::Relaxed);
        });
    }
    let start_ns = match &spec {
        WorkloadSpec::Hog { start_ns, .. }
        | WorkloadSpec::ClosedLoop { start_ns, .. }
        | WorkloadSpec::OpenLoop { start_ns, .. }
        | WorkloadSpec::Bursty { start_ns, .. }
        | WorkloadSpec::MemoryHog { start_ns, .. }
        | WorkloadSpec::FileServer { start_ns, .. }
        | WorkloadSpec::CacheWriter { start_ns, .. }
        | WorkloadSpec::Analytics { start_ns, .. }
        | WorkloadSpec::Duty { start_ns, .. }
        | WorkloadSpec::Dd { start_ns, .. }
        | WorkloadSpec::Database { start_ns, .. }
        | WorkloadSpec::Iperf { start_ns, .. } => *start_ns,
    };
    let run = Run {
        stop,
        start: t0 + start_ns,
    };
    let rec = match spec {
        WorkloadSpec::Hog { threads, .. } => hog(&run, threads),
        WorkloadSpec::FileServer {
            clients,
            service,
            think,
            working_set_bytes,
            file_bytes,
            ..
        } => {
            let Some(dir) = &args.files else {
                eprintln!(
                    "colosim-load: error: --files: required for a file_server (the directory of its working set)"
                );
                return 2;
            };
            let files = match open_files(dir, working_set_bytes, file_bytes) {
                Ok(f) => Arc::new(f),
                Err(e) => {
                    eprintln!("colosim-load: error: {e}");
                    return 2;
                }
            };
            file_server(&run, args.seed, files, file_bytes, clients.max(1), service, think)
        }
        WorkloadSpec::Duty {
            max_threads,
            cores,
            period_ns,
            ..
        } => duty(&run, max_threads, cores, period_ns),
        WorkloadSpec::MemoryHog { .. } | WorkloadSpec::CacheWriter { .. } | WorkloadSpec::Analytics { .. } => {
            eprintln!("colosim-load: error: --spec: memory hogs, cache writers and trace-driven workloads do not run under colosim-load (replay runs stress and dd for the first two)");
            return 2;
        }
        WorkloadSpec::Dd { .. } | WorkloadSpec::Database { .. } | WorkloadSpec::Iperf { .. } => {
            eprintln!("colosim-load: error: --spec: IO and network workloads do not run under colosim-load (replay runs dd itself)");
            return 2;
        }
        WorkloadSpec::ClosedLoop {
            client_cpu: Some(_), ..
        } => {
            eprintln!("colosim-load: error: --spec: client_cpu (a load generator's own CPU) is the simulator's model of a real generator; colosim-load does not burn it");
            return 2;
        }
        WorkloadSpec::ClosedLoop { workers: Some(_), .. } => {
            eprintln!(
                "colosim-load: error: --spec: a closed_loop with a worker pool (workers) does not run on the host yet"
            );
            return 2;
        }
        WorkloadSpec::ClosedLoop {
            clients,
            fanout,
            service,
            think,
            shape,
            ..
        } => closed_loop(
            &run,
            args.seed,
            LoopSpec { service, shape },
            clients,
            fanout.max(1),
            think,
        ),
        WorkloadSpec::OpenLoop {
            rate_per_s,
            workers,
            service,
            shape,
            ..
        } => open_loop(&run, args.seed, LoopSpec { service, shape }, rate_per_s, workers.max(1)),
        WorkloadSpec::Bursty {
            steady_threads,
            burst_threads,
            every_ns,
            length_ns,
            ..
        } => bursty(&run, steady_threads, burst_threads.max(1), every_ns.max(1), length_ns),
    };
    let mut doc = serde_json::json!({
        "t0_ns": t0,
        "started": rec.started,
        "completed": rec.latencies.len(),
        "latencies_ns": rec.latencies,
        "completions_ns": rec.completions,
    });
    if !rec.hits.is_empty() {
        doc["hits"] = serde_json::json!(rec.hits);
    }
    let text = doc.to_string();
    let written = match &args.out {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("{path}: {e}")),
        None => {
            println!("{text}");
            Ok(())
        }
    };
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("colosim-load: error: --out {e}");
            1
        }
    }
}
