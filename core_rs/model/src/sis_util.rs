//! SIS_UTIL (Linux 6.0+, features.h default on): `select_idle_cpu` scans at most
//! `sd_llc_shared->nr_idle_scan` CPUs of the LLC for an idle one, fewer the busier the LLC
//! (fair.c `update_idle_cpu_scan`, `select_idle_cpu`).
//!
//! update_idle_cpu_scan: with x = Σ util / llc_weight (util scaled to SCHED_CAPACITY_SCALE
//! = 1024 per CPU) and pct the LLC domain's imbalance_pct (117),
//!   y = 1024 − min(x²·pct² / (10000·1024), 1024),   nr_idle_scan = y·llc_weight / 1024,
//! all in integer arithmetic (`do_div` truncates). The scan stops altogether at
//! x ≥ 1024·100/pct (85% busy for 117). select_idle_cpu: nr = nr_idle_scan + 1; nr == 1
//! returns no CPU at once; otherwise each CPU looked at (from target + 1, wrapping) costs one
//! (`if (--nr <= 0) return -1`), so at most nr_idle_scan CPUs are looked at. The limit binds
//! only the idle-CPU scan: the idle-core scan (`has_idle_core`) is not limited.
//!
//! Where the model departs: the kernel refreshes nr_idle_scan from the LLC's PELT util_avg
//! sum at each periodic (not newly idle) balance of the LLC domain; the model computes it at
//! the wakeup from the utilisation it uses for balancing (lb_groups.rs: a CPU running a task
//! counts SCHED_CAPACITY_SCALE, an idle one 0) — the value PELT converges to on a CPU that
//! keeps its state, without the averaging's lag or the balance interval's staleness.
//! Gated like `wake_affine`: only with an explicit `[kernel] version` (sched_features.rs), so
//! scenarios without one keep the full scan they always had.

use crate::node::Node;
use crate::topology::{CpuId, DomainLevel};

/// SCHED_CAPACITY_SCALE: one CPU's full capacity.
pub const SCHED_CAPACITY_SCALE: u64 = 1024;

/// `update_idle_cpu_scan`'s formula: how many CPUs of an LLC of `llc_weight` CPUs whose
/// utilisation sums to `sum_util` `select_idle_cpu` may look at.
pub fn nr_idle_scan(sum_util: u64, llc_weight: u64, imbalance_pct: u64) -> u64 {
    let x = sum_util / llc_weight.max(1);
    let tmp = (x * x * imbalance_pct * imbalance_pct) / (10_000 * SCHED_CAPACITY_SCALE);
    let y = SCHED_CAPACITY_SCALE - tmp.min(SCHED_CAPACITY_SCALE);
    y * llc_weight / SCHED_CAPACITY_SCALE
}

impl Node {
    /// The scan limit of `select_idle_cpu` on LLC `llc_id` (None: SIS_UTIL off, no limit).
    pub(crate) fn idle_scan_limit(&self, llc_id: usize) -> Option<u64> {
        if !self.tun.feat.sis_util {
            return None;
        }
        let weight = self.topo.socket_cpus[llc_id].len() as u64;
        // A CPU that runs a task is fully utilised; `LlcIdle::truly` counts the others.
        let busy = weight - self.llc_idle[llc_id].truly as u64;
        // sd_llc is the MC domain unless it spans one core only (then SMT's, imbalance 110).
        let level = if self.topo.core_cpus[0].len() as u64 == weight {
            DomainLevel::Smt
        } else {
            DomainLevel::Llc
        };
        Some(nr_idle_scan(busy * SCHED_CAPACITY_SCALE, weight, level.imbalance_pct()))
    }

    /// `select_idle_cpu`'s idle-CPU loop under the limit: the first CPU idle for a wakeup
    /// among at most `limit` of the (allowed) CPUs in scan order (None: no limit).
    pub(crate) fn first_idle_within(&self, allowed: impl Iterator<Item = CpuId>, limit: Option<u64>) -> Option<CpuId> {
        let n = limit.map_or(usize::MAX, |l| l as usize);
        allowed.take(n).find(|&c| self.idle_for_wake(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::TaskState;
    use serde_json::json;

    /// One LLC of 16 CPUs without SMT, CPUs 0–11 each running one pinned hog, and a sleeping
    /// service task (its one request done at t = 0, then a think of 1000 s).
    fn node(features: serde_json::Value) -> (Node, usize) {
        let spec = json!({"topology": {"cores_per_socket": 16},
            "kernel": {"scheduler": "eevdf", "version": "6.18", "sched_features": features},
            "cgroups": [{"name": "w"}, {"name": "busy", "cpuset.cpus": "0-11"}],
            "workloads": [
                {"kind": "closed_loop", "name": "svc", "cgroup": "w", "clients": 1,
                 "service": {"dist": "constant", "value_ns": 1},
                 "think": {"dist": "constant", "value_ns": 1_000_000_000_000u64}},
                {"kind": "hog", "name": "h", "cgroup": "busy", "threads": 12}]});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(100_000_000).unwrap();
        let t = n.tasks.iter().position(|t| t.wl == 0).unwrap();
        assert_eq!(n.tasks[t].state, TaskState::Sleeping);
        for c in 0..16 {
            assert_eq!(n.cpus[c].curr.is_some(), c < 12, "CPU {c}");
        }
        (n, t)
    }

    #[test]
    fn a_busy_llc_scans_only_nr_idle_scan_cpus() {
        // 12 of 16 busy: nr_idle_scan = 3 (hand-worked above). Woken on busy CPU 0, the scan
        // looks at CPUs 1–3 (busy) and stops: the wakee stays on 0. From CPU 9 it looks at
        // 10, 11, 12 and finds 12. Without SIS_UTIL the whole LLC is scanned: 12 either way.
        let (n, t) = node(json!({}));
        assert_eq!(n.idle_scan_limit(0), Some(3));
        assert_eq!(n.select_idle_sibling(t, 0, 0), 0);
        assert_eq!(n.select_idle_sibling(t, 9, 9), 12);
        let (n, t) = node(json!({"SIS_UTIL": false}));
        assert_eq!(n.idle_scan_limit(0), None);
        assert_eq!(n.select_idle_sibling(t, 0, 0), 12);
        assert_eq!(n.select_idle_sibling(t, 9, 9), 12);
    }

    #[test]
    fn nr_idle_scan_follows_update_idle_cpu_scan() {
        // Hand-worked with fair.c's integer steps, LLC of 16 CPUs, pct 117:
        // idle LLC: x = 0 → y = 1024 → 16.
        assert_eq!(nr_idle_scan(0, 16, 117), 16);
        // 8 of 16 busy: x = 512; 512²·117² = 3_588_227_072 / 10_240_000 = 350 → y = 674
        // → 674·16/1024 = 10 (10.53 truncated).
        assert_eq!(nr_idle_scan(8 * 1024, 16, 117), 10);
        // 12 of 16: x = 768; 768²·13689 / 10_240_000 = 788 → y = 236 → 3 (3.69).
        assert_eq!(nr_idle_scan(12 * 1024, 16, 117), 3);
        // 14 of 16 (87.5% > 100/117 = 85.5%): x = 896 → 1073 ≥ 1024 → 0: no scan.
        assert_eq!(nr_idle_scan(14 * 1024, 16, 117), 0);
        // 96-CPU LLC at 80 busy: x = 853 (853.33 truncated); 853²·13689/10_240_000 = 972
        // → y = 52 → 52·96/1024 = 4.
        assert_eq!(nr_idle_scan(80 * 1024, 96, 117), 4);
        // a partial util sum: 3000 over 4 CPUs → x = 750 → 751 → y = 273 → 1.
        assert_eq!(nr_idle_scan(3000, 4, 117), 1);
    }
}
