//! A cgroup as the cpu controller sees it: cpu.shares, cpu.idle, cpu.qos_level, and the
//! per-CPU load contributions that `calc_group_shares` divides its shares by.

use crate::bandwidth::{CfsBandwidth, CpuStat};
use crate::psi::Psi;
use crate::stats::CgroupStats;
use crate::tunables::{scale_load, WEIGHT_IDLEPRIO};

pub type CgId = usize;
pub const ROOT: CgId = 0;

/// `g` is `ancestor` or below it, in a tree given by each cgroup's parent.
pub fn descends(parents: &[Option<CgId>], mut g: CgId, ancestor: CgId) -> bool {
    loop {
        if g == ancestor {
            return true;
        }
        match parents[g] {
            Some(p) => g = p,
            None => return false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Cgroup {
    pub name: String,
    pub parent: Option<CgId>,
    pub children: Vec<CgId>,
    pub depth: u32,
    /// cpu.shares (tg->shares), 2..=262144.
    pub shares: u64,
    /// cpu.idle: the group entity is SCHED_IDLE-like and weighs WEIGHT_IDLEPRIO.
    pub idle: bool,
    /// openEuler cpu.qos_level: -1 offline, 0 online.
    pub qos_level: i64,
    /// qos_level = -1 here or on an ancestor.
    pub offline: bool,
    /// Load of this group's cfs_rq on each CPU as last published, unscaled (tg->load_avg's
    /// terms, `tg_load_avg_contrib`).
    pub load_contrib: Vec<u64>,
    /// Σ load_contrib (tg->load_avg).
    pub total_load: u64,
    pub nr_tasks: u32,
    pub stats: CgroupStats,
    /// CPU time of its own tasks since time 0, never reset (the time series' counter).
    pub usage_total_ns: u64,
    /// CFS bandwidth control: cpu.cfs_quota_us / cpu.cfs_period_us / cpu.cfs_burst_us.
    pub bw: CfsBandwidth,
    /// cpu.stat at the last reset_stats; reported counters are the difference.
    pub cpu_stat_base: CpuStat,
    /// cpu.pressure (PSI), and its totals at the last reset_stats.
    pub psi: Psi,
    pub psi_base: [u64; 2],
    /// memory.pressure: SOME is the time at least one task of the subtree was in a memory
    /// stall (a memory.high sleep, direct reclaim); FULL the time one was and no task of the
    /// subtree was runnable (every non-idle task stalled; direct reclaim runs, so it only
    /// counts to SOME).
    pub mem_psi: Psi,
    pub mem_psi_base: [u64; 2],
    /// Tasks of the subtree in a memory stall now, and since when one was.
    pub memstall: u32,
    pub memstall_since: u64,
    /// Runnable (or running) tasks of the subtree, and since when FULL has held (if it does).
    pub nr_runnable: u32,
    pub memfull_since: Option<u64>,
    /// cpuset.cpus / cpuset.mems as membership masks (CPUs, NUMA nodes).
    pub cpus: Vec<bool>,
    pub mems: Vec<bool>,
    /// An implicit session group of the root (autogroup.rs), not a cgroup of the scenario.
    pub autogroup: bool,
}

impl Cgroup {
    pub fn new(
        name: String,
        parent: Option<CgId>,
        shares: u64,
        idle: bool,
        qos_level: i64,
        ncpus: usize,
        nnodes: usize,
    ) -> Cgroup {
        Cgroup {
            name,
            parent,
            children: vec![],
            depth: 0,
            shares,
            idle,
            qos_level,
            offline: false,
            load_contrib: vec![0; ncpus],
            total_load: 0,
            nr_tasks: 0,
            stats: CgroupStats::default(),
            usage_total_ns: 0,
            bw: CfsBandwidth::default(),
            cpu_stat_base: CpuStat::default(),
            psi: Psi::default(),
            psi_base: [0; 2],
            mem_psi: Psi::default(),
            mem_psi_base: [0; 2],
            memstall: 0,
            memstall_since: 0,
            nr_runnable: 0,
            memfull_since: None,
            cpus: vec![true; ncpus],
            mems: vec![true; nnodes],
            autogroup: false,
        }
    }

    /// tg->shares as the scheduler uses it (scaled). A cpu.idle group's cpu.shares is
    /// WEIGHT_IDLEPRIO = 3 (`sched_group_set_idle`, kernel-and-anchors.md §A7).
    pub fn effective_shares(&self) -> u64 {
        debug_assert!(!self.idle || scale_load(self.shares) == WEIGHT_IDLEPRIO);
        scale_load(self.shares)
    }
}

impl Cgroup {
    /// cpu.stat since the last reset.
    pub fn cpu_stat(&self) -> CpuStat {
        self.bw.stat.since(&self.cpu_stat_base)
    }
}
