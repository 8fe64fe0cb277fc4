//! Scheduling entities and the per-(cgroup, CPU) run queue they sit in: the kernel's
//! `sched_entity` and `cfs_rq`, with the timeline ordered by vruntime.

use crate::cgroup::CgId;
use crate::topology::CpuId;
use crate::workload::TaskId;

pub type SeId = usize;
/// Index of a cfs_rq: cgroup * ncpus + cpu.
pub type RqId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeKind {
    Task(TaskId),
    /// The group entity that represents the cfs_rq `RqId` inside its parent's cfs_rq.
    Group(RqId),
}

#[derive(Debug, Clone)]
pub struct Se {
    pub kind: SeKind,
    pub vruntime: i64,
    /// Remainder of the last vruntime division, so that updates split anyhow add up exactly.
    pub vrem: u64,
    /// Load weight, scaled like the kernel's on 64-bit (nice 0 = scale_load(1024)).
    pub weight: u64,
    pub sum_exec: u64,
    /// sum_exec when it was last picked (the slice is measured from here).
    pub prev_sum_exec: u64,
    pub on_rq: bool,
    /// The cfs_rq this entity is queued in (changes for a task when it migrates).
    pub parent_rq: RqId,
    /// EEVDF: virtual deadline, lag saved at dequeue (virtual time), and RUN_TO_PARITY's
    /// protected vruntime (`se->vprot`: the slice is protected while vruntime < vprot).
    pub deadline: i64,
    pub vlag: i64,
    pub vprot: i64,
    /// DELAY_DEQUEUE (6.12): asleep but still queued until picked or woken (`sched_delayed`).
    pub delayed: bool,
    /// PLACE_REL_DEADLINE: `deadline` holds deadline − vruntime until the next placement.
    pub rel_deadline: bool,
    /// EEVDF request size in ns (`se->slice`): base_slice, a task's `sched_attr.sched_runtime`
    /// (6.12+, `custom_slice`), or for a group entity the shortest slice queued below it.
    pub slice: u64,
    /// `se->custom_slice`: `slice` is not reset to base_slice at placement and renewal.
    pub custom_slice: bool,
    /// A task entity's PELT load average (`se->avg`, pelt.rs), at its weight; a group
    /// entity's, unweighted: the runnable fraction of the time (× RUNNABLE_UNIT) its weight
    /// counts at in its parent's load_avg, as `reweight_entity` rescales it at once.
    pub avg: crate::pelt::Avg,
    /// A task's or top-level group entity's running average (`se->avg.util_sum`, unweighted:
    /// RUNNABLE_UNIT while it is its queue's curr; other group entities keep none). A leaving
    /// task takes its own out of its top-level group entity's, and `update_tg_cfs_load` never
    /// lets that entity's runnable estimate fall below the running time left.
    pub util: crate::pelt::Avg,
}

impl Se {
    pub fn new(kind: SeKind, parent_rq: RqId, weight: u64) -> Se {
        Se {
            kind,
            vruntime: 0,
            vrem: 0,
            weight,
            sum_exec: 0,
            prev_sum_exec: 0,
            on_rq: false,
            parent_rq,
            deadline: 0,
            vlag: 0,
            vprot: i64::MIN,
            delayed: false,
            rel_deadline: false,
            slice: 0,
            custom_slice: false,
            avg: Default::default(),
            util: Default::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CfsRq {
    pub cg: CgId,
    pub cpu: CpuId,
    /// This cfs_rq's entity in the parent cfs_rq (None for the root).
    pub gse: Option<crate::cfs_rq::SeId>,
    /// Σ weight of queued entities, curr included.
    pub load: u64,
    /// The part of `load` that group entities weigh: the root's PELT average integrates the
    /// rest (its tasks), and `cpu_load` adds each group entity at its current weight
    /// (lb_groups.rs).
    pub group_load: u64,
    /// Queued entities, curr included.
    pub nr_running: u32,
    /// Tasks queued anywhere below (not counting throttled subtrees).
    pub h_nr_running: u32,
    /// Of those, tasks that are SCHED_IDLE or under an idle group.
    pub idle_h_nr_running: u32,
    pub min_vruntime: i64,
    /// Queued entities except curr, sorted by (vruntime, id): deterministic ties. A sorted
    /// vector, not a tree: a queue holds a handful of entities (one per runnable task or
    /// group of this cgroup on this CPU), where a binary search and a short move beat a
    /// B-tree's node walk; the first entry is the kernel's cached `rb_leftmost`.
    pub timeline: Vec<(i64, SeId)>,
    /// Running sums over the timeline (curr excluded), as the kernel keeps them for an O(1)
    /// `avg_vruntime` (`avg_vruntime_add`/`_sub`): Σ w·(v − min_vruntime) and Σ w, w unscaled.
    /// Kept only under EEVDF (`keeps_avg`): CFS (≤ 6.5) has no `avg_vruntime`, and nothing
    /// else reads them.
    pub sum_wkey: i128,
    pub sum_w: i128,
    pub keeps_avg: bool,
    pub curr: Option<SeId>,
    /// The next buddy (`cfs_rq->next`): picked first while eligible (PICK_BUDDY).
    pub next: Option<SeId>,
    /// Why this queue is throttled (its entity is off the parent while any bit is set).
    pub throttled: Throttle,
    /// CFS bandwidth: this group has a quota (`cfs_rq->runtime_enabled`).
    pub runtime_enabled: bool,
    /// Local runtime silo (`cfs_rq->runtime_remaining`); may go negative by one tick.
    pub runtime_remaining: i64,
    /// When bandwidth throttling started (`throttled_clock`).
    pub throttled_at: u64,
    /// PELT load average of `load` (kept only with `[kernel] group_shares = "pelt"`).
    pub avg: crate::pelt::Avg,
    /// When this queue last wrote its contribution to the group's load_avg
    /// (`last_update_tg_load_avg`).
    pub tg_load_written: Option<u64>,
    /// When the kernel last ran `update_curr` on this queue for a reason the tick and the
    /// pick do not cover: an entity joined or left it (`enqueue_entity`/`dequeue_entity` start
    /// with it), an entity on it was reweighed, a wakeup was checked at its level
    /// (eevdf.rs `unseen_curr_v`).
    pub curr_seen_at: u64,
    /// Time (ns) this queue had k tasks runnable below it (`h_nr_running`; bucket
    /// min(k, NR_BUCKETS − 1)) up to `nr_since`: how often a group's queue on a CPU runs dry,
    /// which is when a sibling or a sleeper there gets the CPU from a group holding its lag
    /// (docs/replay.md, "Where a group's queue runs dry"). A statistic: reset_stats zeroes it.
    pub nr_time: [u64; NR_BUCKETS],
    pub nr_since: u64,
}

/// Buckets of `CfsRq::nr_time`: 0 … NR_BUCKETS − 1 runnable tasks, the last open-ended.
pub const NR_BUCKETS: usize = 16;

/// Reasons a cfs_rq is throttled; the queue is off its parent while any is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttle(u8);

impl Throttle {
    pub const NONE: Throttle = Throttle(0);
    /// openEuler qos_level = -1: online work is runnable on this CPU.
    pub const QOS: Throttle = Throttle(1);
    /// CFS bandwidth: the group's quota is used up for this period.
    pub const BANDWIDTH: Throttle = Throttle(2);
    /// openEuler SMT expeller: the SMT sibling runs online work.
    pub const EXPELLED: Throttle = Throttle(4);

    pub fn any(self) -> bool {
        self.0 != 0
    }
    pub fn has(self, r: Throttle) -> bool {
        self.0 & r.0 != 0
    }
    pub fn with(self, r: Throttle) -> Throttle {
        Throttle(self.0 | r.0)
    }
    pub fn without(self, r: Throttle) -> Throttle {
        Throttle(self.0 & !r.0)
    }
}

impl CfsRq {
    pub fn new(cg: CgId, cpu: CpuId, gse: Option<SeId>, keeps_avg: bool) -> CfsRq {
        CfsRq {
            cg,
            cpu,
            gse,
            load: 0,
            group_load: 0,
            nr_running: 0,
            h_nr_running: 0,
            idle_h_nr_running: 0,
            min_vruntime: 0,
            timeline: Vec::new(),
            sum_wkey: 0,
            sum_w: 0,
            keeps_avg,
            curr: None,
            next: None,
            throttled: Throttle::NONE,
            runtime_enabled: false,
            runtime_remaining: 0,
            throttled_at: 0,
            avg: crate::pelt::Avg::default(),
            tg_load_written: None,
            curr_seen_at: 0,
            nr_time: [0; NR_BUCKETS],
            nr_since: 0,
        }
    }

    /// Credit the time since the last change to the current runnable count: called before
    /// `h_nr_running` changes.
    #[inline]
    pub fn account_nr(&mut self, now: u64) {
        let k = (self.h_nr_running as usize).min(NR_BUCKETS - 1);
        self.nr_time[k] += now - self.nr_since;
        self.nr_since = now;
    }

    /// `nr_time` with the time since the last change credited, as of `now`.
    pub fn nr_time_at(&self, now: u64) -> [u64; NR_BUCKETS] {
        let mut t = self.nr_time;
        t[(self.h_nr_running as usize).min(NR_BUCKETS - 1)] += now - self.nr_since;
        t
    }

    #[inline]
    pub fn leftmost(&self) -> Option<(i64, SeId)> {
        self.timeline.first().copied()
    }

    /// `__enqueue_entity`: onto the timeline and into the running sums (`avg_vruntime_add`);
    /// `w` is the entity's unscaled weight.
    pub fn insert(&mut self, v: i64, se: SeId, w: u64) {
        let key = (v, se);
        // CFS puts back the entity that used up its slice, whose key is most often past
        // every queued one: an append, without the search.
        if self.timeline.last().is_none_or(|&last| last < key) {
            self.timeline.push(key);
        } else if let Err(i) = self.timeline.binary_search(&key) {
            self.timeline.insert(i, key);
        }
        if self.keeps_avg {
            self.sum_wkey += w as i128 * (v - self.min_vruntime) as i128;
            self.sum_w += w as i128;
        }
    }

    /// `__dequeue_entity` (`avg_vruntime_sub`).
    pub fn remove(&mut self, v: i64, se: SeId, w: u64) {
        let key = (v, se);
        // CFS's pick takes the leftmost: no search for it.
        if self.timeline.first() == Some(&key) {
            self.timeline.remove(0);
        } else if let Ok(i) = self.timeline.binary_search(&key) {
            self.timeline.remove(i);
        }
        if self.keeps_avg {
            self.sum_wkey -= w as i128 * (v - self.min_vruntime) as i128;
            self.sum_w -= w as i128;
        }
    }

    /// min_vruntime moves forward: every key shrinks by the step (`avg_vruntime_update`).
    pub fn set_min_vruntime(&mut self, v: i64) {
        if self.keeps_avg {
            self.sum_wkey -= self.sum_w * (v - self.min_vruntime) as i128;
        }
        self.min_vruntime = v;
    }
}
