//! Scheduling entities and the per-(cgroup, CPU) run queue they sit in: the kernel's
//! `sched_entity` and `cfs_rq`, with the timeline ordered by vruntime.

use crate::cgroup::CgId;
use crate::topology::CpuId;
use crate::workload::TaskId;
use std::collections::BTreeSet;

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
    /// Load weight, scaled like the kernel's on 64-bit (nice 0 = scale_load(1024)).
    pub weight: u64,
    pub sum_exec: u64,
    /// sum_exec when it was last picked (the slice is measured from here).
    pub prev_sum_exec: u64,
    pub on_rq: bool,
    /// The cfs_rq this entity is queued in (changes for a task when it migrates).
    pub parent_rq: RqId,
}

impl Se {
    pub fn new(kind: SeKind, parent_rq: RqId, weight: u64) -> Se {
        Se { kind, vruntime: 0, weight, sum_exec: 0, prev_sum_exec: 0, on_rq: false, parent_rq }
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
    /// Queued entities, curr included.
    pub nr_running: u32,
    /// Tasks queued anywhere below (not counting throttled subtrees).
    pub h_nr_running: u32,
    /// Of those, tasks that are SCHED_IDLE or under an idle group.
    pub idle_h_nr_running: u32,
    pub min_vruntime: i64,
    /// Queued entities except curr, by (vruntime, id): deterministic ties.
    pub timeline: BTreeSet<(i64, SeId)>,
    pub curr: Option<SeId>,
    /// Throttled by qos_level absolute preemption: its entity is off the parent.
    pub throttled: bool,
}

impl CfsRq {
    pub fn new(cg: CgId, cpu: CpuId, gse: Option<SeId>) -> CfsRq {
        CfsRq {
            cg,
            cpu,
            gse,
            load: 0,
            nr_running: 0,
            h_nr_running: 0,
            idle_h_nr_running: 0,
            min_vruntime: 0,
            timeline: BTreeSet::new(),
            curr: None,
            throttled: false,
        }
    }

    pub fn leftmost(&self) -> Option<(i64, SeId)> {
        self.timeline.first().copied()
    }
}
