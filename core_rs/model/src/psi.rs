//! CPU pressure stall information (Documentation/accounting/psi.rst, kernel/sched/psi.c;
//! kernel-and-anchors.md §A10 "PSI"), per cgroup and for the node (the root cgroup, i.e.
//! /proc/pressure/cpu).
//!
//! Per CPU and cgroup the state follows the group's tasks on that CPU: SOME while one of them
//! is runnable but not running, FULL while some are runnable and none runs, NONIDLE while any
//! is runnable. A task throttled by CFS bandwidth is still runnable (it stays queued), so
//! quota throttling shows up as pressure. Every PSI_FREQ the per-CPU times are folded into the
//! group's total, each CPU weighted by its non-idle time (`collect_percpu_times`), and the
//! running averages are updated with the kernel's fixed-point decay (`calc_avgs`). The node
//! level reports FULL as zero for CPU, as the kernel does.

use crate::cgroup::{CgId, ROOT};
use crate::events::{Event, Ns};
use crate::node::Node;
use crate::topology::CpuId;
use crate::workload::TaskId;

/// `FIXED_1` of the load-average arithmetic (1 << FSHIFT, FSHIFT = 11).
const FIXED_1: u64 = 1 << 11;
/// Decay per 2 s period for the 10 s, 60 s and 300 s averages (`EXP_10s` …).
const EXP: [u64; 3] = [1677, 1981, 2034];

/// Per (cgroup, CPU) state.
#[derive(Debug, Clone, Copy, Default)]
pub struct PsiCpu {
    /// Runnable tasks of the cgroup's subtree on this CPU (running included).
    pub nr: u32,
    /// One of them is running.
    pub oncpu: bool,
    pub since: Ns,
    /// Time spent in SOME / FULL / NONIDLE, and the part already folded into the totals.
    pub times: [u64; 3],
    pub folded: [u64; 3],
}

/// Per cgroup aggregate: cpu.pressure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Psi {
    /// Cumulative stall time (ns) for SOME and FULL.
    pub total: [u64; 2],
    /// total at the last average update.
    pub avg_total: [u64; 2],
    /// avg10/avg60/avg300 for SOME and FULL, fixed point (FIXED_1 = 1.0, i.e. 1%).
    pub avg: [[u64; 3]; 2],
}

/// `calc_load`: exponential decay in fixed point, rounding up when the load grows.
fn calc_load(load: u64, exp: u64, active: u64) -> u64 {
    let mut newload = load * exp + active * (FIXED_1 - exp);
    if active >= load {
        newload += FIXED_1 - 1;
    }
    newload / FIXED_1
}

/// `PSI_FREQ` = 2 s + 1 tick.
pub fn psi_period(tick_ns: Ns) -> Ns {
    2_000_000_000 + tick_ns
}

impl PsiCpu {
    fn tick(&mut self, now: Ns) {
        let d = now - self.since;
        if d > 0 && self.nr > 0 {
            self.times[2] += d;
            if self.nr > self.oncpu as u32 {
                self.times[0] += d;
            }
            if !self.oncpu {
                self.times[1] += d;
            }
        }
        self.since = now;
    }
}

impl Node {
    #[inline]
    fn psi_at(&mut self, cg: CgId, cpu: CpuId) -> &mut PsiCpu {
        let ncpus = self.ncpus();
        &mut self.psi_cpu[cg * ncpus + cpu]
    }

    /// Task `t` became runnable (+1) or stopped being runnable (−1) on `cpu`.
    pub(crate) fn psi_runnable(&mut self, t: TaskId, cpu: CpuId, delta: i32) {
        let now = self.now;
        let mut g = Some(self.tasks[t].cg);
        while let Some(cg) = g {
            let p = self.psi_at(cg, cpu);
            p.tick(now);
            p.nr = (p.nr as i32 + delta) as u32;
            let c = &mut self.cgroups[cg];
            c.nr_runnable = (c.nr_runnable as i32 + delta) as u32;
            crate::node_memory::update_full(c, now);
            g = self.cgroups[cg].parent;
        }
    }

    /// The task running on `cpu` changed from `prev` to `next` (`psi_task_switch`): next's cgroups gain the running task, prev's lose it. Those the two
    /// share (their closest common ancestor and above) keep one running task, so their state
    /// does not change and, as in kernel/sched/psi.c, neither walk visits them: next's walk
    /// stops at the first cgroup already marked running on this CPU (it holds prev: only the
    /// running task's cgroups are marked, and only here), prev's walk at that same cgroup.
    /// Leaving their interval open is exact: every reader first closes it (`tick`), and the
    /// times are integer sums.
    pub(crate) fn psi_switch(&mut self, cpu: CpuId, prev: Option<TaskId>, next: Option<TaskId>) {
        let now = self.now;
        let mut common = None;
        if let Some(t) = next {
            let mut g = Some(self.tasks[t].cg);
            while let Some(cg) = g {
                let p = self.psi_at(cg, cpu);
                if p.oncpu {
                    common = g;
                    break;
                }
                p.tick(now);
                p.oncpu = true;
                g = self.cgroups[cg].parent;
            }
        }
        if let Some(t) = prev {
            let mut g = Some(self.tasks[t].cg);
            while g != common {
                let cg = g.expect("prev's cgroups lead to the common one");
                let p = self.psi_at(cg, cpu);
                p.tick(now);
                p.oncpu = false;
                g = self.cgroups[cg].parent;
            }
        }
    }

    /// Exactly the running task's cgroups are marked running on each CPU (`psi_switch` relies
    /// on it to find the cgroups prev and next share; for `check_invariants`).
    pub(crate) fn check_psi_oncpu(&self) -> Result<(), String> {
        let ncpus = self.ncpus();
        for cpu in 0..ncpus {
            let mut want = vec![false; self.cgroups.len()];
            let mut g = self.cpus[cpu].curr.map(|t| self.tasks[t].cg);
            while let Some(cg) = g {
                want[cg] = true;
                g = self.cgroups[cg].parent;
            }
            for (cg, &w) in want.iter().enumerate() {
                if self.psi_cpu[cg * ncpus + cpu].oncpu != w {
                    return Err(format!("PSI: cgroup {cg} on CPU {cpu} marked running {}, not {w}", !w));
                }
            }
        }
        Ok(())
    }

    /// `collect_percpu_times`: fold the per-CPU times since the last fold into the cgroup's
    /// totals, weighting each CPU by its non-idle time in that window.
    pub(crate) fn psi_collect(&mut self, cg: CgId) {
        let now = self.now;
        let ncpus = self.ncpus();
        let mut deltas = [0u128; 2];
        let mut nonidle_total = 0u128;
        for cpu in 0..ncpus {
            let p = &mut self.psi_cpu[cg * ncpus + cpu];
            p.tick(now);
            let d: [u64; 3] = std::array::from_fn(|s| p.times[s] - p.folded[s]);
            p.folded = p.times;
            nonidle_total += d[2] as u128;
            for (delta, &ds) in deltas.iter_mut().zip(&d[..2]) {
                *delta += ds as u128 * d[2] as u128;
            }
        }
        let psi = &mut self.cgroups[cg].psi;
        for (s, delta) in deltas.iter().enumerate() {
            if cg == ROOT && s == 1 {
                continue; // no system-wide FULL for CPU
            }
            psi.total[s] += (delta / nonidle_total.max(1)) as u64;
        }
    }

    /// `psi_avgs_work`, every PSI_FREQ: collect, then decay the averages with this period's
    /// share of stalled time (`calc_avgs`).
    pub(crate) fn psi_update(&mut self) {
        let period = self.now - self.psi_last;
        self.fold_memstall();
        for cg in 0..self.cgroups.len() {
            self.psi_collect(cg);
            decay(&mut self.cgroups[cg].psi, period);
            decay(&mut self.cgroups[cg].mem_psi, period);
        }
        self.psi_last = self.now;
        let at = self.now + psi_period(self.tun.tick_ns);
        self.queue.push(at, Event::Psi);
    }

    /// Average as a float percentage (avg10, avg60, avg300) for SOME (0) or FULL (1).
    pub fn pressure_avgs(&self, cg: CgId, s: usize) -> [f64; 3] {
        self.cgroups[cg].psi.avg[s].map(|v| v as f64 / FIXED_1 as f64)
    }

    /// cpu.pressure (or, `memory`, memory.pressure) as the kernel prints it (total in µs).
    pub fn pressure_text(&self, cg: CgId) -> String {
        pressure_text(&self.cgroups[cg].psi)
    }

    pub fn memory_pressure_text(&mut self, cg: CgId) -> String {
        self.fold_memstall();
        pressure_text(&self.cgroups[cg].mem_psi)
    }
}

/// `calc_avgs` for one period: this period's share of stalled time into the averages.
fn decay(psi: &mut Psi, period: Ns) {
    for s in 0..2 {
        let stalled = psi.total[s] - psi.avg_total[s];
        psi.avg_total[s] = psi.total[s];
        let pct = (stalled.min(period) as u128 * 100 / period.max(1) as u128) as u64 * FIXED_1;
        for (i, e) in EXP.iter().enumerate() {
            psi.avg[s][i] = calc_load(psi.avg[s][i], *e, pct);
        }
    }
}

fn pressure_text(psi: &Psi) -> String {
    let fmt = |v: u64| {
        // LOAD_INT.LOAD_FRAC with two decimals, as psi_show prints them.
        let int = v >> 11;
        let frac = ((v & (FIXED_1 - 1)) * 100) >> 11;
        format!("{int}.{frac:02}")
    };
    let line = |name: &str, s: usize| {
        format!(
            "{name} avg10={} avg60={} avg300={} total={}",
            fmt(psi.avg[s][0]),
            fmt(psi.avg[s][1]),
            fmt(psi.avg[s][2]),
            psi.total[s] / 1000
        )
    };
    format!("{}\n{}\n", line("some", 0), line("full", 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calc_load_converges_like_the_kernel() {
        // 100% for n periods: avg = 100 (1 − e^n) up to fixed-point rounding.
        let mut a = 0;
        for _ in 0..30 {
            a = calc_load(a, EXP[1], 100 * FIXED_1);
        }
        let want = 100.0 * (1.0 - (1981.0f64 / 2048.0).powi(30));
        assert!(
            ((a as f64 / FIXED_1 as f64) - want).abs() < 0.5,
            "{} vs {want}",
            a as f64 / FIXED_1 as f64
        );
    }
}
