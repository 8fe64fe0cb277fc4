//! One block device shared by the node's cgroups: a fluid model of device time.
//!
//! Every IO costs device time by the kernel's iocost linear model (`block/blk-iocost.c`):
//! a 4 KiB page costs 1 s / (bps / 4096), and an IO adds a base cost of
//! max(1 s / seqiops − page cost, 0) when sequential, max(1 s / randiops − page cost, 0) when
//! random. The device delivers one second of device time per second; the IOs in flight share
//! it by weighted max-min (`fluid.rs`), then each completes after the device's access
//! `latency_ns`. Who gets what share follows the IO stack:
//! - `mq-deadline`, `kyber`, `none`: no cgroup weights — every queue gets an equal turn;
//! - `bfq` (and the old `cfq`): proportional by `blkio.weight` (v1 cfq; bfq's
//!   blkio.bfq.weight, v2 io.bfq.weight), hierarchically;
//! - iocost (`blkio.cost.qos enable=1` at the root: v2 io.cost.qos, Alibaba Cloud Linux and
//!   openEuler's v1 port): proportional by `blkio.cost.weight` (v2 io.weight) in the cost
//!   model's units, hierarchically (hweight = Π weight / Σ weights of active siblings), and
//!   with the vrate pinned (min = max, as rubik writes it) the model's rate caps the device;
//! - blk-throttle (`blkio.throttle.{read,write}_{bps,iops}_device`, v2 io.max): hard caps
//!   on a cgroup's subtree, whatever the scheduler.
//!
//! Buffered writes do not reach the device from the writer: they dirty the page cache, and
//! the flusher writes back in 4 MiB chunks (MAX_WRITEBACK_PAGES) once dirty memory passes
//! vm.dirty_background_ratio; a writer past vm.dirty_ratio waits for writeback
//! (balance_dirty_pages). Without cgroup writeback (cgroup v1; the v2 io+memory pair or
//! openEuler's cgroup1_writeback turns it on) the flusher's IO belongs to the root cgroup, so
//! a writer's weight and limits do not govern its buffered writes — seed 004's finding.

use crate::cgroup::{CgId, ROOT};
use crate::error::{Result, SpecError};
use crate::events::Ns;
use crate::fluid::{Filling, Limit};
use serde::Deserialize;
use std::collections::VecDeque;

pub const PAGE: f64 = 4096.0;
/// Writeback writes at most this much of an inode per pass (MAX_WRITEBACK_PAGES × 4 KiB).
pub const WB_CHUNK: u64 = 4 << 20;
/// Largest request the flusher builds (max_sectors_kb's usual 512 KiB).
const WB_IO: u64 = 512 << 10;
/// Default blkio weight: bfq's and iocost's (cgroup-v2.rst: io.weight default 100).
pub const DEFAULT_WEIGHT: u64 = 100;
/// vm.dirty_expire_centisecs = 3000, vm.dirty_writeback_centisecs = 500 (mm/page-writeback.c).
pub const DIRTY_EXPIRE: Ns = 30_000_000_000;
pub const DIRTY_WRITEBACK: Ns = 5_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IoScheduler {
    None,
    #[default]
    MqDeadline,
    Kyber,
    Bfq,
    Cfq,
}

impl IoScheduler {
    /// Schedulers that share by cgroup weight.
    pub fn proportional(self) -> bool {
        matches!(self, IoScheduler::Bfq | IoScheduler::Cfq)
    }
}

/// The iocost linear model's six parameters (io.cost.model), also used as the device itself.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearModel {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

impl LinearModel {
    pub fn check(&self, field: &str) -> Result<()> {
        for (k, v) in self.fields() {
            if v == 0 {
                return Err(SpecError::new(
                    format!("{field}.{k}"),
                    "must be > 0 (the linear model divides by it)",
                ));
            }
        }
        Ok(())
    }

    fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("rbps", self.rbps),
            ("rseqiops", self.rseqiops),
            ("rrandiops", self.rrandiops),
            ("wbps", self.wbps),
            ("wseqiops", self.wseqiops),
            ("wrandiops", self.wrandiops),
        ]
    }

    /// Device time (ns) of `ios` IOs moving `bytes` in all.
    pub fn cost(&self, dir: Dir, bytes: u64, ios: u64, random: bool) -> f64 {
        let (bps, seq, rand) = match dir {
            Dir::Read => (self.rbps, self.rseqiops, self.rrandiops),
            Dir::Write => (self.wbps, self.wseqiops, self.wrandiops),
        };
        let page = 1e9 * PAGE / bps as f64;
        let base = (1e9 / if random { rand } else { seq } as f64 - page).max(0.0);
        let pages = (bytes as f64 / PAGE).ceil().max(ios as f64);
        ios as f64 * base + pages * page
    }

    /// Parse io.cost.model's text: "[MAJ:MIN] [ctrl=user] [model=linear] rbps=… …" (the
    /// device number is accepted and ignored: the node has one disk). ctrl=auto: None (the
    /// kernel's own model of the device, i.e. the device).
    pub fn parse(text: &str, knob: &str) -> Result<Option<LinearModel>> {
        let mut m = [0u64; 6];
        let mut auto = false;
        for tok in text.split_whitespace() {
            if tok.contains(':') && !tok.contains('=') {
                continue;
            }
            let (k, v) = tok
                .split_once('=')
                .ok_or_else(|| SpecError::new(knob, format!("expected KEY=VALUE, got {tok:?}")))?;
            match (k, v) {
                ("ctrl", "auto") => auto = true,
                ("ctrl", "user") | ("model", "linear") => {}
                ("model", _) => return Err(SpecError::new(knob, format!("only model=linear exists (got {v:?})"))),
                _ => {
                    let i = ["rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"]
                        .iter()
                        .position(|n| *n == k)
                        .ok_or_else(|| SpecError::new(knob, format!("unknown key {k:?} (rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops, ctrl, model)")))?;
                    m[i] = v
                        .parse()
                        .map_err(|_| SpecError::new(knob, format!("{k} must be a positive integer (got {v:?})")))?;
                }
            }
        }
        if auto {
            return Ok(None);
        }
        let model = LinearModel {
            rbps: m[0],
            rseqiops: m[1],
            rrandiops: m[2],
            wbps: m[3],
            wseqiops: m[4],
            wrandiops: m[5],
        };
        model.check(knob)?;
        Ok(Some(model))
    }

    pub fn text(&self) -> String {
        let f = self.fields();
        format!(
            "ctrl=user model=linear {}",
            f.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
        )
    }
}

/// The node's disk, as the scenario gives it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSpec {
    /// What the device can do, in the linear model's terms: bytes/s and 4 KiB IO/s (a SATA
    /// SSD by default: 550/500 MB/s sequential, 90k/80k random IOPS).
    #[serde(default = "d_rbps")]
    pub rbps: u64,
    #[serde(default = "d_rseqiops")]
    pub rseqiops: u64,
    #[serde(default = "d_rrandiops")]
    pub rrandiops: u64,
    #[serde(default = "d_wbps")]
    pub wbps: u64,
    #[serde(default = "d_wseqiops")]
    pub wseqiops: u64,
    #[serde(default = "d_wrandiops")]
    pub wrandiops: u64,
    /// Access latency each IO pays on top of its device time.
    #[serde(default = "default_latency")]
    pub latency_ns: u64,
    /// /sys/block/<dev>/queue/scheduler.
    #[serde(default)]
    pub scheduler: IoScheduler,
}

fn d_rbps() -> u64 {
    550_000_000
}
fn d_rseqiops() -> u64 {
    130_000
}
fn d_rrandiops() -> u64 {
    90_000
}
fn d_wbps() -> u64 {
    500_000_000
}
fn d_wseqiops() -> u64 {
    120_000
}
fn d_wrandiops() -> u64 {
    80_000
}

impl DiskSpec {
    pub fn device(&self) -> LinearModel {
        LinearModel {
            rbps: self.rbps,
            rseqiops: self.rseqiops,
            rrandiops: self.rrandiops,
            wbps: self.wbps,
            wseqiops: self.wseqiops,
            wrandiops: self.wrandiops,
        }
    }
}
fn default_latency() -> u64 {
    80_000
}

/// blk-throttle limits of one cgroup (0: none), in the v1 files' units (bytes/s, IO/s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttle {
    pub read_bps: u64,
    pub write_bps: u64,
    pub read_iops: u64,
    pub write_iops: u64,
}

/// A cgroup's IO knobs and counters.
#[derive(Debug, Clone)]
pub struct IoCgroup {
    /// blkio.weight (cfq/bfq), 1..=1000.
    pub weight: u64,
    /// blkio.cost.weight (iocost, v2 io.weight), 1..=10000.
    pub cost_weight: u64,
    pub throttle: Throttle,
    pub stat: IoStat,
    /// `stat` at the last reset.
    pub base: IoStat,
}

/// blkio.throttle.io_service_bytes / io_serviced (and v2 io.stat) of the cgroup's own IO,
/// plus the time its tasks waited on IO (submission to completion, dirty throttling
/// included). Bytes are counted as the device moves them (fluidly), so a rate read over any
/// window is the true one.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoStat {
    pub read_bytes: f64,
    pub write_bytes: f64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub wait_ns: u64,
}

impl IoStat {
    pub fn since(&self, b: &IoStat) -> IoStat {
        IoStat {
            read_bytes: self.read_bytes - b.read_bytes,
            write_bytes: self.write_bytes - b.write_bytes,
            read_ios: self.read_ios - b.read_ios,
            write_ios: self.write_ios - b.write_ios,
            wait_ns: self.wait_ns - b.wait_ns,
        }
    }
}

/// Who is told when an IO completes: workload `wl`'s timer `tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waker {
    pub wl: usize,
    pub tag: u32,
}

/// An IO a task submits (spec'd by its workload).
#[derive(Debug, Clone, Copy)]
pub struct IoOp {
    pub cg: CgId,
    pub dir: Dir,
    pub bytes: u64,
    pub random: bool,
    /// O_DIRECT (or a read); false: a buffered write into the page cache.
    pub direct: bool,
    pub waker: Waker,
}

#[derive(Debug, Clone)]
struct Flow {
    cg: CgId,
    dir: Dir,
    bytes: u64,
    ios: u64,
    random: bool,
    cost: f64,
    done: f64,
    rate: f64,
    submitted: Ns,
    kind: FlowKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlowKind {
    /// A task's IO: it is woken when the IO completes.
    Sync(Waker),
    /// A flusher chunk of this owner's dirty pages.
    Writeback,
    /// bfq/cfq idling: the device waits (up to slice_idle, until this time) for the next
    /// request of a sync queue that just completed one, so that a queue-depth-1 reader or
    /// writer keeps its weighted share — the reason cfq/bfq weights hold for dd (seed 004).
    /// Holds its share of device time, moves nothing.
    Idle(Ns),
}

/// bfq_slice_idle = NSEC_PER_SEC / 125 (and cfq's slice_idle): 8 ms.
pub const SLICE_IDLE: Ns = 8_000_000;

/// iocost as enabled at the root (blkio.cost.qos / io.cost.qos).
#[derive(Debug, Clone, Copy)]
pub struct IoCost {
    /// None: ctrl=auto, the kernel's model of this very device.
    pub model: Option<LinearModel>,
    pub enabled: bool,
    /// vrate bounds in percent (min, max); equal: pinned.
    pub vrate: (f64, f64),
}

#[derive(Debug)]
pub struct Disk {
    pub spec: DiskSpec,
    parents: Vec<Option<CgId>>,
    pub cgs: Vec<IoCgroup>,
    pub iocost: IoCost,
    pub cgroup_writeback: bool,
    flows: Vec<Flow>,
    clock: Ns,
    /// Generation of the pending disk event; bumped on every reshare.
    pub gen: u64,
    /// Dirty page-cache bytes per owner cgroup, and their total.
    dirty: Vec<u64>,
    dirty_since: Vec<Option<Ns>>,
    inflight: Vec<u64>,
    flush_all: Vec<bool>,
    pub dirty_total: u64,
    pub dirty_thresh: u64,
    pub background_thresh: u64,
    /// Buffered writes waiting in balance_dirty_pages: (op, since).
    waiting: VecDeque<(IoOp, Ns)>,
    /// IO completions due: (time, waker), for the node to deliver.
    pub completions: Vec<(Ns, Waker)>,
    pub kupdate_armed: bool,
    /// Writeback that ended since the node last looked: (owner, bytes), for the page cache
    /// to clean its dirty objects (lru.rs `written_back`).
    pub cleaned: Vec<(CgId, u64)>,
    /// `reshare`'s working memory (no result depends on what it held before).
    sharing: Sharing,
}

/// The buffers one `reshare` fills: flow weights, the limits, iocost's cost ratios,
/// `flow_weights`' per-cgroup sums, and the filling's own.
#[derive(Debug, Clone, Default)]
struct Sharing {
    weights: Vec<f64>,
    limits: Vec<Limit>,
    ratio: Vec<f64>,
    own: Vec<u32>,
    active: Vec<bool>,
    total: Vec<f64>,
    hw: Vec<f64>,
    filling: Filling,
    /// Limits in use: the first `nlimits` of `limits` (the rest are kept for their buffers).
    nlimits: usize,
}

impl Sharing {
    /// The next limit, emptied, with this capacity; its index.
    fn limit(&mut self, capacity: f64) -> usize {
        if self.limits.len() == self.nlimits {
            self.limits.push(Limit::default());
        }
        let l = &mut self.limits[self.nlimits];
        l.capacity = capacity;
        l.members.clear();
        self.nlimits += 1;
        self.nlimits - 1
    }
}

/// `x.ceil().max(1.0) as u64` without the libm call `ceil` is on x86-64 without SSE4.1: a
/// value at or above 2^52 is already an integer, below it truncation is exact; NaN and
/// anything ≤ 1 give 1 as before.
#[inline]
fn ceil_at_least_one(x: f64) -> u64 {
    const EXACT: f64 = 4_503_599_627_370_496.0; // 2^52
    let c = if x < EXACT {
        let t = x as u64;
        if (t as f64) < x {
            (t + 1) as f64
        } else {
            t as f64
        }
    } else {
        x
    };
    c.max(1.0) as u64
}

impl Disk {
    pub fn new(
        spec: DiskSpec,
        parents: Vec<Option<CgId>>,
        dirtyable: u64,
        dirty_ratio: u64,
        background_ratio: u64,
        cgroup_writeback: bool,
    ) -> Disk {
        let n = parents.len();
        let cgs = parents
            .iter()
            .map(|_| IoCgroup {
                weight: DEFAULT_WEIGHT,
                cost_weight: DEFAULT_WEIGHT,
                throttle: Throttle::default(),
                stat: IoStat::default(),
                base: IoStat::default(),
            })
            .collect();
        Disk {
            parents,
            spec,
            cgs,
            iocost: IoCost {
                model: None,
                enabled: false,
                vrate: (100.0, 100.0),
            },
            cgroup_writeback,
            flows: vec![],
            clock: 0,
            gen: 0,
            dirty: vec![0; n],
            dirty_since: vec![None; n],
            inflight: vec![0; n],
            flush_all: vec![false; n],
            dirty_total: 0,
            dirty_thresh: dirtyable / 100 * dirty_ratio,
            background_thresh: dirtyable / 100 * background_ratio,
            waiting: VecDeque::new(),
            completions: vec![],
            kupdate_armed: false,
            cleaned: vec![],
            sharing: Sharing::default(),
        }
    }

    fn is_descendant(&self, g: CgId, ancestor: CgId) -> bool {
        crate::cgroup::descends(&self.parents, g, ancestor)
    }

    /// Move every flow on to `now` at its current rate, counting the bytes it moved.
    pub fn settle(&mut self, now: Ns) {
        let dt = now.saturating_sub(self.clock) as f64;
        self.clock = now;
        if dt == 0.0 {
            return;
        }
        for f in &mut self.flows {
            let step = (f.rate * dt).min(f.cost - f.done);
            if step <= 0.0 || matches!(f.kind, FlowKind::Idle(_)) {
                continue;
            }
            f.done += step;
            let moved = f.bytes as f64 * step / f.cost;
            let st = &mut self.cgs[f.cg].stat;
            match f.dir {
                Dir::Read => st.read_bytes += moved,
                Dir::Write => st.write_bytes += moved,
            }
        }
    }

    /// A task submits an IO at `now` (the disk is settled to `now`).
    pub fn submit(&mut self, op: IoOp, now: Ns) {
        if op.dir == Dir::Write && !op.direct {
            self.waiting.push_back((op, now));
            self.admit_dirty(now);
            return;
        }
        // the queue's next request ends the device's wait for it
        self.flows
            .retain(|f| !(f.cg == op.cg && matches!(f.kind, FlowKind::Idle(_))));
        let cost = self.spec.device().cost(op.dir, op.bytes, 1, op.random);
        self.flows.push(Flow {
            cg: op.cg,
            dir: op.dir,
            bytes: op.bytes,
            ios: 1,
            random: op.random,
            cost,
            done: 0.0,
            rate: 0.0,
            submitted: now,
            kind: FlowKind::Sync(op.waker),
        });
    }

    /// balance_dirty_pages: buffered writes go into the cache while dirty memory stays under
    /// vm.dirty_ratio's threshold, in submission order; then writeback is kicked. With
    /// cgroup writeback each owner is held to its slice of the threshold instead (the kernel
    /// splits it among the writeback domains by their writeout share, `__wb_calc_thresh`;
    /// here equally among the owners with dirty pages), so an owner whose writeback is
    /// slower (a lower weight) is throttled harder.
    fn admit_dirty(&mut self, now: Ns) {
        let per_owner = self.cgroup_writeback;
        let owners = if per_owner {
            let mut seen = vec![false; self.cgs.len()];
            for (op, _) in &self.waiting {
                seen[op.cg] = true;
            }
            (0..self.cgs.len())
                .filter(|&g| seen[g] || self.dirty[g] > 0)
                .count()
                .max(1) as u64
        } else {
            1
        };
        let mut i = 0;
        while i < self.waiting.len() {
            let (op, since) = self.waiting[i];
            let owner = if per_owner { op.cg } else { ROOT };
            let (held, limit) = if per_owner {
                (self.dirty[owner], self.dirty_thresh / owners)
            } else {
                (self.dirty_total, self.dirty_thresh)
            };
            if held > 0 && held + op.bytes > limit {
                if !per_owner {
                    break; // one global domain: first come, first served
                }
                i += 1;
                continue;
            }
            self.waiting.remove(i);
            self.dirty[owner] += op.bytes;
            self.dirty_since[owner].get_or_insert(now);
            self.dirty_total += op.bytes;
            self.cgs[op.cg].stat.wait_ns += now - since;
            self.completions.push((now, op.waker));
        }
        self.start_writeback(now);
    }

    /// Start a flusher chunk for every owner with dirty pages not yet under writeback, while
    /// dirty memory is over the background threshold (or its pages expired).
    fn start_writeback(&mut self, now: Ns) {
        for owner in 0..self.cgs.len() {
            if self.inflight[owner] > 0 {
                continue;
            }
            let left = self.dirty[owner];
            if left == 0 || !(self.dirty_total > self.background_thresh || self.flush_all[owner]) {
                continue;
            }
            let bytes = left.min(WB_CHUNK);
            let ios = bytes.div_ceil(WB_IO);
            let cost = self.spec.device().cost(Dir::Write, bytes, ios, false);
            self.inflight[owner] = bytes;
            self.flows.push(Flow {
                cg: owner,
                dir: Dir::Write,
                bytes,
                ios,
                random: false,
                cost,
                done: 0.0,
                rate: 0.0,
                submitted: now,
                kind: FlowKind::Writeback,
            });
        }
    }

    /// `wakeup_flusher_threads(WB_REASON_VMSCAN)`: reclaim met dirty pages nobody is writing
    /// back; every owner's dirty pages are written back whole (`wb_start_writeback`:
    /// WB_start_all), whatever the background threshold.
    pub fn wakeup_flusher(&mut self, now: Ns) {
        for owner in 0..self.cgs.len() {
            if self.dirty[owner] > 0 {
                self.flush_all[owner] = true;
            }
        }
        self.start_writeback(now);
    }

    /// The flusher's writeback in flight at `now`: how long until the first chunk completes
    /// at the device's current sharing (ns), and its bytes; None when none is in flight.
    /// What a task throttled in reclaim waits for (lru.rs `LegacyWait`).
    pub fn writeback_due(&self, now: Ns) -> Option<(u64, u64)> {
        let dt = now.saturating_sub(self.clock) as f64;
        self.flows
            .iter()
            .filter(|f| f.kind == FlowKind::Writeback && f.rate > 0.0)
            .map(|f| {
                let left = (f.cost - f.done - f.rate * dt).max(0.0);
                ((left / f.rate).ceil() as u64, f.bytes)
            })
            .min_by_key(|&(due, _)| due)
    }

    /// Device time of writing back one byte: a flusher chunk's, sequential.
    pub fn writeback_ns_per_byte(spec: &DiskSpec) -> f64 {
        spec.device().cost(Dir::Write, WB_CHUNK, WB_CHUNK / WB_IO, false) / WB_CHUNK as f64
    }

    /// The periodic flusher (every dirty_writeback_centisecs): owners whose pages have been
    /// dirty for dirty_expire_centisecs are written back whole. Returns whether to re-arm.
    pub fn kupdate(&mut self, now: Ns) -> bool {
        for owner in 0..self.cgs.len() {
            if let Some(since) = self.dirty_since[owner] {
                if now >= since + DIRTY_EXPIRE {
                    self.flush_all[owner] = true;
                }
            }
        }
        self.start_writeback(now);
        self.dirty_total > 0
    }

    /// Take the flows that have finished by `now` out (settled), schedule their completions.
    pub fn finish(&mut self, now: Ns) {
        let idling = self.spec.scheduler.proportional() && !self.iocost.enabled;
        let mut i = 0;
        while i < self.flows.len() {
            let f = &self.flows[i];
            let over = match f.kind {
                FlowKind::Idle(until) => until <= now,
                // within a nanosecond of device time of the end: done (f64 rounding)
                _ => f.cost - f.done <= 1.0,
            };
            if !over {
                i += 1;
                continue;
            }
            let f = self.flows.remove(i);
            if let FlowKind::Idle(_) = f.kind {
                continue;
            }
            let st = &mut self.cgs[f.cg].stat;
            match f.dir {
                Dir::Read => st.read_ios += f.ios,
                Dir::Write => st.write_ios += f.ios,
            }
            match f.kind {
                FlowKind::Sync(w) => {
                    let at = now + self.spec.latency_ns;
                    self.cgs[f.cg].stat.wait_ns += at - f.submitted;
                    self.completions.push((at, w));
                    if idling {
                        let until = at + SLICE_IDLE;
                        self.flows.push(Flow {
                            kind: FlowKind::Idle(until),
                            bytes: 0,
                            ios: 0,
                            done: 0.0,
                            rate: 0.0,
                            ..f
                        });
                    }
                }
                FlowKind::Idle(_) => {}
                FlowKind::Writeback => {
                    let owner = f.cg;
                    self.inflight[owner] = 0;
                    self.cleaned.push((owner, f.bytes));
                    self.dirty[owner] -= f.bytes;
                    self.dirty_total -= f.bytes;
                    if self.dirty[owner] == 0 {
                        self.dirty_since[owner] = None;
                        self.flush_all[owner] = false;
                    }
                }
            }
        }
        self.admit_dirty(now);
    }

    /// Share the device among the flows in flight; returns when the next one finishes.
    pub fn reshare(&mut self) -> Option<Ns> {
        if self.flows.is_empty() {
            return None;
        }
        // Runs twice per IO: its buffers are kept (`Sharing`) rather than allocated each time.
        let mut sh = std::mem::take(&mut self.sharing);
        let n = self.flows.len();
        let iocost = self.iocost.enabled;
        self.flow_weights(&mut sh);
        sh.nlimits = 0;
        let all = sh.limit(1.0);
        sh.limits[all].members.extend((0..n).map(|f| (f, 1.0)));
        if iocost {
            let model = self.iocost.model.unwrap_or_else(|| self.spec.device());
            sh.ratio.clear();
            sh.ratio.extend(self.flows.iter().map(|f| {
                if f.ios == 0 {
                    1.0
                } else {
                    model.cost(f.dir, f.bytes, f.ios, f.random) / f.cost
                }
            }));
            // shares are hweight in the model's units: weight per device ns = hw / ratio
            for (w, r) in sh.weights.iter_mut().zip(&sh.ratio) {
                *w /= r;
            }
            let (lo, hi) = self.iocost.vrate;
            if lo == hi {
                let l = sh.limit(hi / 100.0);
                let Sharing { limits, ratio, .. } = &mut sh;
                limits[l].members.extend(ratio.iter().enumerate().map(|(f, &r)| (f, r)));
            }
        }
        for (g, c) in self.cgs.iter().enumerate() {
            let t = c.throttle;
            for (cap, dir, per_byte) in [
                (t.read_bps, Dir::Read, true),
                (t.write_bps, Dir::Write, true),
                (t.read_iops, Dir::Read, false),
                (t.write_iops, Dir::Write, false),
            ] {
                if cap == 0 {
                    continue;
                }
                let l = sh.limit(cap as f64 / 1e9);
                sh.limits[l].members.extend(
                    self.flows
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| f.dir == dir && self.is_descendant(f.cg, g))
                        .map(|(i, f)| (i, if per_byte { f.bytes as f64 } else { f.ios as f64 } / f.cost)),
                );
                if sh.limits[l].members.is_empty() {
                    sh.nlimits -= 1; // no flow under it: no limit
                }
            }
        }
        let Sharing {
            weights,
            limits,
            filling,
            nlimits,
            ..
        } = &mut sh;
        filling.fill(weights, &limits[..*nlimits]);
        // The first completion is clock + ceil_at_least_one(time left) of the flow with the
        // least time left: the rounding is monotone (non-decreasing), so it is applied once, to
        // the least, rather than to every flow (its f64 -> u64 conversions were most of this
        // loop). NaN, which the rounding takes to 1 like any time ≤ 1, counts as 0. Should the
        // most time left overflow the clock (a rate near 0), each flow is rounded as before.
        let mut next = Ns::MAX;
        let (mut least, mut most) = (f64::INFINITY, 0.0f64);
        let mut running = false;
        for (f, &r) in self.flows.iter_mut().zip(&filling.rate) {
            f.rate = r;
            match f.kind {
                FlowKind::Idle(until) => next = next.min(until),
                _ if r > 0.0 => {
                    let left = (f.cost - f.done) / r;
                    let left = if left.is_nan() { 0.0 } else { left };
                    least = least.min(left);
                    most = most.max(left);
                    running = true;
                }
                _ => {}
            }
        }
        if running {
            let done_at = |left: f64| self.clock.wrapping_add(ceil_at_least_one(left));
            if self.clock.checked_add(ceil_at_least_one(most)).is_some() {
                next = next.min(done_at(least));
            } else {
                for (f, &r) in self.flows.iter().zip(&filling.rate) {
                    if r > 0.0 && !matches!(f.kind, FlowKind::Idle(_)) {
                        next = next.min(done_at((f.cost - f.done) / r));
                    }
                }
            }
        }
        self.sharing = sh;
        (next != Ns::MAX).then_some(next)
    }

    /// Each flow's weight (into `sh.weights`): equal under the non-proportional schedulers;
    /// else the cgroup's hweight (its share of the active tree) divided among the flows it
    /// has in flight. A cgroup's own IO competes with its children as one more entity of the
    /// default weight.
    fn flow_weights(&self, sh: &mut Sharing) {
        let n = self.cgs.len();
        let by_cost = self.iocost.enabled;
        sh.weights.clear();
        if !by_cost && !self.spec.scheduler.proportional() {
            sh.weights.resize(self.flows.len(), 1.0);
            return;
        }
        let Sharing {
            own,
            active,
            total,
            hw,
            weights,
            ..
        } = sh;
        own.clear();
        own.resize(n, 0);
        for f in &self.flows {
            own[f.cg] += 1;
        }
        active.clear();
        active.resize(n, false);
        for g in (0..n).rev() {
            if own[g] > 0 {
                active[g] = true;
            }
            if active[g] {
                if let Some(p) = self.parents[g] {
                    active[p] = true;
                }
            }
        }
        let w = |g: CgId| if by_cost { self.cgs[g].cost_weight } else { self.cgs[g].weight } as f64;
        // Σ of active entity weights under each cgroup: its active children and its own IO
        total.clear();
        total.resize(n, 0.0);
        for g in 0..n {
            if own[g] > 0 {
                total[g] += DEFAULT_WEIGHT as f64;
            }
            if g != ROOT && active[g] {
                total[self.parents[g].unwrap()] += w(g);
            }
        }
        hw.clear();
        hw.resize(n, 0.0);
        hw[ROOT] = 1.0;
        for g in 1..n {
            if active[g] {
                let p = self.parents[g].unwrap();
                hw[g] = hw[p] * w(g) / total[p];
            }
        }
        // a flow's weight depends on its cgroup alone: computed once per cgroup (into `hw`,
        // the same expression on the same operands), looked up per flow
        for g in 0..n {
            if own[g] > 0 {
                hw[g] = hw[g] * DEFAULT_WEIGHT as f64 / total[g] / own[g] as f64;
            }
        }
        weights.extend(self.flows.iter().map(|f| hw[f.cg]));
    }

    pub fn stat(&self, cg: CgId) -> IoStat {
        self.cgs[cg].stat.since(&self.cgs[cg].base)
    }

    pub fn reset_stats(&mut self) {
        for c in &mut self.cgs {
            c.base = c.stat;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO52: f64 = 4_503_599_627_370_496.0;

    /// The odd values of a time left: infinities, signed zeros, tiny, around 1, not NaN.
    fn odd_values() -> Vec<f64> {
        vec![
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            0.5,
            1.0,
            1.0 + 1e-15,
            2.0,
            2.5,
            1e9 + 0.25,
            f64::INFINITY,
        ]
    }

    /// What a reclaimer throttled on writeback waits for (lru.rs): the flusher's chunk in
    /// flight. A device writing 10 µs a page (409.6 MB/s, no per-IO base at 100k seq IOPS):
    /// 8 MiB dirty, the flusher woken at 0 submits 4 MiB = 1024 pages = 10.24 ms alone on the
    /// device; a quarter in, 7.68 ms are left; then a read shares the device (scheduler none:
    /// equal turns, half each), so the rest takes twice as long: 15.36 ms.
    #[test]
    fn writeback_due_is_the_chunk_in_flight_at_its_share_of_the_device() {
        let spec = DiskSpec {
            rbps: 409_600_000,
            rseqiops: 100_000,
            rrandiops: 100_000,
            wbps: 409_600_000,
            wseqiops: 100_000,
            wrandiops: 100_000,
            latency_ns: 0,
            scheduler: IoScheduler::None,
        };
        let mut d = Disk::new(spec, vec![None], 1 << 30, 20, 10, false);
        let w = Waker { wl: 0, tag: 0 };
        let op = |dir, direct| IoOp {
            cg: ROOT,
            dir,
            bytes: 8 << 20,
            random: false,
            direct,
            waker: w,
        };
        d.submit(op(Dir::Write, false), 0);
        d.reshare();
        assert_eq!(
            d.writeback_due(0),
            None,
            "under the background threshold: nothing in flight"
        );
        d.wakeup_flusher(0);
        d.reshare();
        assert_eq!(d.writeback_due(0), Some((10_240_000, WB_CHUNK)));
        assert_eq!(d.writeback_due(2_560_000), Some((7_680_000, WB_CHUNK)));
        d.settle(2_560_000);
        d.submit(op(Dir::Read, true), 2_560_000);
        d.reshare();
        assert_eq!(d.writeback_due(2_560_000), Some((15_360_000, WB_CHUNK)));
    }

    /// Against `ceil().max(1.0) as u64`, around the integers, 2^52, 2^64 and the odd values.
    #[test]
    fn ceil_at_least_one_is_ceil_max_one() {
        let two52 = TWO52;
        let mut xs = odd_values();
        xs.push(f64::NAN);
        for base in [two52, 2.0 * two52, 1.8e19, 1.9e19, 1e300] {
            xs.extend([base, base.next_up(), base.next_down()]);
        }
        for i in 0..2000 {
            let x = (i as f64) * 0.37 + 1e6 * (i % 7) as f64;
            xs.extend([x, x.next_up(), x.next_down()]);
        }
        for x in xs {
            assert_eq!(ceil_at_least_one(x), x.ceil().max(1.0) as u64, "{x}");
        }
    }

    /// `reshare` rounds only the least time left: right only if the rounding never decreases
    /// (then the least rounded is the rounded least) and NaN rounds as 0 does.
    #[test]
    fn ceil_at_least_one_is_monotone() {
        let two52 = TWO52;
        let mut xs = odd_values();
        for base in [1.0, 3.0, 1e9, two52, 2.0 * two52, 1.8e19, 1.9e19, 1e300] {
            let (mut up, mut down) = (base, base);
            for _ in 0..50 {
                up = up.next_up();
                down = down.next_down();
                xs.extend([up, down]);
            }
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            xs.push(f64::from_bits(state >> 2)); // positive, every exponent up to 2^1023
        }
        xs.sort_by(f64::total_cmp);
        for w in xs.windows(2) {
            assert!(
                ceil_at_least_one(w[0]) <= ceil_at_least_one(w[1]),
                "{} then {}",
                w[0],
                w[1]
            );
        }
        assert_eq!(ceil_at_least_one(f64::NAN), ceil_at_least_one(0.0));
    }
}
