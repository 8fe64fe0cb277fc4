//! The fair class's tunables with the kernel's defaults and CPU-count scaling
//! (kernel-and-anchors.md §A3, 6.1 fair.c `get_update_sysctl_factor`).

use crate::spec::KernelSpec;

/// Load weights are carried with the kernel's 64-bit fixed point (`scale_load`,
/// SCHED_FIXEDPOINT_SHIFT = 10, §A1): it matters where a group's per-CPU weight falls below
/// one unit, e.g. a cpu.idle group spread over several CPUs.
pub const SCHED_FIXEDPOINT_SHIFT: u32 = 10;

pub const fn scale_load(w: u64) -> u64 {
    w << SCHED_FIXEDPOINT_SHIFT
}

/// `scale_load_down`: back to unscaled units, at least 2 for a non-zero weight.
pub fn scale_load_down(w: u64) -> u64 {
    if w == 0 {
        0
    } else {
        (w >> SCHED_FIXEDPOINT_SHIFT).max(2)
    }
}

/// nice-0 load weight (NICE_0_LOAD = scale_load(1024)).
pub const NICE_0_LOAD: u64 = scale_load(1024);
/// SCHED_IDLE task weight and the weight a cpu.idle group is forced to
/// (scale_load(WEIGHT_IDLEPRIO = 3), §A1/§A7).
pub const WEIGHT_IDLEPRIO: u64 = scale_load(3);
/// calc_group_shares' floor, deliberately *unscaled* (2/1024 of a unit): "MIN_SHARES has to
/// be unscaled here to support per-CPU partitioning of a group with small tg->shares" (§A4).
pub const MIN_SHARES: u64 = 2;
/// sched_nr_latency: beyond this many runnable tasks the period stretches (§A3).
pub const SCHED_NR_LATENCY: u64 = 8;

#[derive(Debug, Clone, Copy)]
pub struct Tunables {
    pub hz: u64,
    pub tick_ns: u64,
    pub sched_latency: u64,
    pub min_granularity: u64,
    pub wakeup_granularity: u64,
    /// Slice floor for an idle entity competing on a non-idle cfs_rq; not scaled.
    pub idle_min_granularity: u64,
    /// openEuler SMT expeller on.
    pub smt_expeller: bool,
    pub alinux_memcg: bool,
    pub openeuler_memcg: bool,
    pub scheduler: crate::spec::SchedulerKind,
    /// EEVDF base slice (`sysctl_sched_base_slice`), scaled like the CFS tunables.
    pub base_slice: u64,
    /// Which EEVDF (`[kernel] version` and `sched_features`; validated with the spec).
    pub feat: crate::sched_features::SchedFeatures,
    /// `[kernel] group_shares = "pelt"`: group shares from PELT load averages (pelt.rs).
    pub pelt_shares: bool,
    /// `normalized_sysctl_sched_base_slice`: base_slice before the CPU-count factor (6.17+
    /// NO_RUN_TO_PARITY protects this much of a slice).
    pub normalized_base_slice: u64,
    /// Some workload has a custom slice (`sched_runtime_ns`): queues' shortest slices must be
    /// looked up; without one every queued slice is base_slice.
    pub custom_slices: bool,
}

/// 1 + ilog2(min(ncpus, 8)): 1, 2, 3, 4 for 1, 2–3, 4–7, ≥8 CPUs (SCHED_TUNABLESCALING_LOG).
pub fn sysctl_factor(ncpus: usize) -> u64 {
    let n = ncpus.clamp(1, 8) as u64;
    1 + (63 - n.leading_zeros() as u64)
}

impl Tunables {
    pub fn new(k: &KernelSpec, ncpus: usize) -> Tunables {
        let f = sysctl_factor(ncpus);
        let hz = k.hz.unwrap_or(250) as u64;
        Tunables {
            hz,
            tick_ns: 1_000_000_000 / hz,
            sched_latency: k.sched_latency_ns.unwrap_or(6_000_000 * f),
            min_granularity: k.sched_min_granularity_ns.unwrap_or(750_000 * f),
            wakeup_granularity: k.sched_wakeup_granularity_ns.unwrap_or(1_000_000 * f),
            idle_min_granularity: k.sched_idle_min_granularity_ns.unwrap_or(750_000),
            smt_expeller: k.smt_expeller,
            alinux_memcg: k.alinux_memcg,
            openeuler_memcg: k.openeuler_memcg,
            scheduler: k.scheduler,
            // 0.70 ms since commit 2ae891b82695 (6.15, backported to 6.12.y); §A6.
            base_slice: k.base_slice_ns.unwrap_or(700_000 * f),
            feat: k.features().unwrap_or_default(),
            pelt_shares: k.group_shares == crate::spec::GroupShares::Pelt,
            normalized_base_slice: k.base_slice_ns.unwrap_or(700_000 * f) / f,
            custom_slices: k.sched_runtime_ns.values().any(|&ns| ns != 0),
        }
    }

    /// `__sched_period`: sched_latency for up to sched_nr_latency tasks, else nr × min_granularity.
    pub fn period(&self, nr_running: u64) -> u64 {
        if nr_running > SCHED_NR_LATENCY {
            nr_running * self.min_granularity
        } else {
            self.sched_latency
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_matches_kernel_table() {
        assert_eq!([1, 2, 3, 4, 7, 8, 96].map(sysctl_factor), [1, 2, 2, 3, 3, 4, 4]);
    }

    #[test]
    fn server_defaults_are_24_3_4_ms() {
        let t = Tunables::new(&KernelSpec::default(), 96);
        assert_eq!(
            (t.sched_latency, t.min_granularity, t.wakeup_granularity),
            (24_000_000, 3_000_000, 4_000_000)
        );
        assert_eq!(t.tick_ns, 4_000_000);
        assert_eq!(t.period(8), 24_000_000);
        assert_eq!(t.period(10), 30_000_000);
    }
}
