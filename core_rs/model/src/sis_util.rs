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
//! The input (`update_sd_lb_stats` → `update_idle_cpu_scan`): Σ `cpu_util_cfs` over the LLC's
//! CPUs, written into `sd_llc_shared->nr_idle_scan` at each balance of the LLC domain that is
//! not newly idle — the periodic balance of the CPU that `should_we_balance` picks, and the
//! NOHZ idle balance done for idle CPUs — and read by every wakeup until the next one.
//! `cpu_util_cfs` is the root cfs_rq's PELT util_avg (pelt.c: its sum grows by 1024 per
//! 1024 µs while a fair entity runs there, `cfs_rq->curr != NULL`), capped at the CPU's
//! capacity, so a CPU that started running a task a few ms ago still counts little, and one
//! that went idle keeps counting for tens of ms (32 ms half-life).
//!
//! Where the model departs: a task's util does not move with it when it migrates
//! (`attach`/`detach_entity_load_avg` of util_avg): each CPU's util is the PELT average of
//! its own running, so the LLC's sum — all SIS_UTIL reads — is exact while tasks move within
//! the LLC and lags by PELT's averaging when they cross it; UTIL_EST's max(util_avg,
//! util_est) is not taken; every CPU's average is brought to the balance's now (the kernel's
//! busy CPUs are at most a tick stale, its idle ones as stale as `nohz.next_blocked`); a
//! balance that retries without an all-pinned CPU (LBF_ALL_PINNED's redo) writes the whole
//! LLC's sum, not the sum over the CPUs left.
//! Gated like `wake_affine`: only with an explicit `[kernel] version` (sched_features.rs), so
//! scenarios without one keep the full scan they always had.

use crate::node::Node;
use crate::topology::CpuId;

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

/// A CPU's root cfs_rq util_avg: the PELT average (pelt.rs `Avg`, with 1024 as the
/// "load" while running: `util_sum += contrib << SCHED_CAPACITY_SHIFT`, util_avg =
/// util_sum / divider, the same steps as load_avg from a weight of 1024) of whether it runs
/// a task.
#[derive(Debug, Clone, Default)]
pub struct CpuUtil {
    pub avg: crate::pelt::Avg,
    /// Whether a task runs (counted in `avg` from its last update on).
    pub running: bool,
}

impl CpuUtil {
    /// The running task changes at `now` (balance.rs `refresh_idle`): bring the average to
    /// date with what ran until now, then count `running` on.
    pub fn set_running(&mut self, now: u64, running: bool) {
        if running != self.running {
            self.avg.update(now, self.contribution());
            self.running = running;
        }
    }

    fn contribution(&self) -> u64 {
        if self.running {
            SCHED_CAPACITY_SCALE
        } else {
            0
        }
    }

    /// `cpu_util_cfs` at `now`: util_avg brought to date, capped at the CPU's capacity.
    pub fn util_at(&self, now: u64) -> u64 {
        self.avg.load_avg_at(now, self.contribution()).min(SCHED_CAPACITY_SCALE)
    }
}

impl Node {
    /// `cpu_util_cfs(cpu)` now (without UTIL_EST, see the module doc).
    pub(crate) fn cpu_util_cfs(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu].util.util_at(self.now)
    }

    /// `update_idle_cpu_scan` from a balance of `cpu`'s domain `d` that is not newly idle:
    /// only SIS_UTIL on and only the LLC's domain (span weight = `sd_llc_size`), with that
    /// domain's imbalance_pct (MC's 117, or SMT's 110 where the LLC is one core).
    pub(crate) fn update_idle_cpu_scan(&mut self, cpu: CpuId, d: usize) {
        if !self.tun.feat.sis_util {
            return;
        }
        let llc_id = self.topo.socket_of[cpu];
        let dom = &self.topo.domains[cpu][d];
        let llc = &self.topo.socket_cpus[llc_id];
        if dom.span.len() != llc.len() {
            return;
        }
        let sum_util: u64 = llc.iter().map(|&c| self.cpu_util_cfs(c)).sum();
        let nr = nr_idle_scan(sum_util, llc.len() as u64, dom.level.imbalance_pct());
        self.llc_idle[llc_id].nr_idle_scan = nr as u32;
    }

    /// The scan limit of `select_idle_cpu` on LLC `llc_id` (None: SIS_UTIL off, no limit):
    /// `nr_idle_scan` as the last LLC balance left it.
    pub(crate) fn idle_scan_limit(&self, llc_id: usize) -> Option<u64> {
        self.tun
            .feat
            .sis_util
            .then(|| self.llc_idle[llc_id].nr_idle_scan as u64)
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

    /// One LLC of 16 CPUs without SMT, CPUs 0–11 each running one pinned hog from t = 0, and
    /// a sleeping service task (its one request done at 1 ms, then a think of 1000 s). It
    /// starts after the hogs are placed: forked beside them it would take CPU 0 at t = 0, the
    /// twelfth hog would share CPU 11, and that hog, cache-hot at every tick, would move only
    /// after CPU 0's idle balances failed twice (~36 ms: lb_groups.rs `held_hot`).
    fn node(features: serde_json::Value) -> (Node, usize) {
        let spec = json!({"topology": {"cores_per_socket": 16},
            "kernel": {"scheduler": "eevdf", "version": "6.18", "sched_features": features},
            "cgroups": [{"name": "w"}, {"name": "busy", "cpuset.cpus": "0-11"}],
            "workloads": [
                {"kind": "closed_loop", "name": "svc", "cgroup": "w", "clients": 1,
                 "service": {"dist": "constant", "value_ns": 1},
                 "think": {"dist": "constant", "value_ns": 1_000_000_000_000u64}, "start_ns": 1_000_000},
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

    /// `update_idle_cpu_scan` from the LLC domain's balance (its only domain here) at `at`.
    fn balance_llc_at(n: &mut Node, at: u64) {
        n.run_until(at).unwrap();
        n.update_idle_cpu_scan(0, 0);
    }

    #[test]
    fn a_busy_llc_scans_only_nr_idle_scan_cpus() {
        // Steady state (2 s of 12 hogs: each busy CPU's util_avg within 1/1024 of 1024, see
        // the next test): 12 of 16 busy gives nr_idle_scan = 3 (hand-worked below).
        // Woken on busy CPU 0, the scan looks at CPUs 1–3 (busy) and stops: the wakee stays
        // on 0; from CPU 6 it looks at 7–9 and stays too; from CPU 9 it looks at 10, 11, 12
        // and finds 12. Without SIS_UTIL the whole LLC is scanned: 12 every time.
        let (mut n, t) = node(json!({}));
        // the node's own balancing writes it: the NOHZ balances of the idle CPUs 12–15 (the
        // LLC domain's interval, 16 ms, while the busy CPUs kick them) have refreshed it since
        n.run_until(2_000_000_000).unwrap();
        assert_eq!(n.idle_scan_limit(0), Some(3));
        balance_llc_at(&mut n, 2_000_000_000);
        assert_eq!(n.idle_scan_limit(0), Some(3));
        assert_eq!(n.select_idle_sibling(t, 0, 0), 0);
        assert_eq!(n.select_idle_sibling(t, 6, 6), 6);
        assert_eq!(n.select_idle_sibling(t, 9, 9), 12);
        let (mut n, t) = node(json!({"SIS_UTIL": false}));
        balance_llc_at(&mut n, 2_000_000_000);
        assert_eq!(n.idle_scan_limit(0), None);
        for prev in [0, 6, 9] {
            assert_eq!(n.select_idle_sibling(t, prev, prev), 12);
        }
    }

    #[test]
    fn the_scan_limit_reads_the_llcs_pelt_util_at_its_last_balance() {
        // The hogs start at t = 0, so at t each busy CPU's util_avg is PELT's
        // 1024·(1 − y^n) for n = t / 1.048576 ms periods, y^32 = 1/2 (a geometric sum with
        // nothing before it; the kernel's divider counts the current period's part, within
        // 1%). At 100 ms: n = 95.37, y^n = 2^(−2.980) = 0.1267, util 894.2 — not the 1024
        // "a running CPU is fully utilised" gave. The LLC's sum, 12 × 894 = 10 729, makes
        // x = 670, tmp = 670²·13689/10 240 000 = 600, y = 424 and nr_idle_scan =
        // 424·16/1024 = 6 (any util within 876 – 922 makes 6), not 3: woken on CPU 6 the
        // scan now reaches 12. The value is the balance's: 1 s later, with no balance of the
        // LLC in between, the scan is still 6 wide.
        let spec = json!({"topology": {"cores_per_socket": 16}, "kernel": {"version": "6.18"}});
        let fresh = Node::from_json(&spec.to_string()).unwrap();
        assert_eq!(fresh.idle_scan_limit(0), Some(16)); // an idle LLC's, until a balance
        let (mut n, t) = node(json!({}));
        balance_llc_at(&mut n, 100_000_000);
        let want = 1024.0 * (1.0 - 0.5f64.powf(100e6 / 1_048_576.0 / 32.0));
        assert!((want - 894.2).abs() < 0.1, "{want}");
        for c in 0..16 {
            let u = n.cpu_util_cfs(c) as f64;
            if c < 12 {
                assert!((u - want).abs() < want / 100.0, "CPU {c}: util {u}, want {want}");
            } else {
                assert_eq!(u, 0.0, "CPU {c}");
            }
        }
        assert_eq!(n.idle_scan_limit(0), Some(6));
        assert_eq!(n.select_idle_sibling(t, 6, 6), 12);
        // no balance of the LLC between (the periodic balancer writes it, so only here)
        n.now = 1_100_000_000;
        assert!(n.cpu_util_cfs(0) > 1020);
        assert_eq!(n.idle_scan_limit(0), Some(6));
        n.update_idle_cpu_scan(0, 0);
        assert_eq!(n.idle_scan_limit(0), Some(3));
    }

    #[test]
    fn an_idle_cpus_util_decays_with_pelts_half_life() {
        // A CPU that stopped running keeps its util, halving every 32 periods (33.55 ms):
        // at steady state 1024·(1 − y^n) ≈ 1024 before, 512 (±1%) 33.55 ms after it went idle.
        let mut u = CpuUtil::default();
        u.set_running(0, true);
        let stop = 2_000_000_000;
        u.set_running(stop, false);
        let before = u.util_at(stop) as f64;
        assert!(before > 1020.0, "{before}");
        let half = u.util_at(stop + 32 * 1_048_576) as f64;
        assert!((half - before / 2.0).abs() < before / 100.0, "{half}");
        // a decay of 10 half-lives leaves 1/1024 of it
        assert!(u.util_at(stop + 320 * 1_048_576) <= 1);
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
