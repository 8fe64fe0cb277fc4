//! CFS bandwidth control and burst (Documentation/scheduler/sched-bwc.rst; fair.c
//! `__refill_cfs_bandwidth_runtime`, `assign_cfs_rq_runtime`, `throttle_cfs_rq`,
//! `do_sched_cfs_period_timer`, `distribute_cfs_runtime`, `return_cfs_rq_runtime`,
//! `do_sched_cfs_slack_timer`; kernel-and-anchors.md §A8).
//!
//! Each group with a quota has a global pool refilled by `quota` every `period` and capped at
//! `quota + burst`. Each CPU's cfs_rq of the group runs on a local silo pulled from the pool
//! in 5 ms slices; the silo is charged as the group runs, and when it is spent and the pool is
//! empty the cfs_rq is throttled (its entity leaves the parent queue) until the period timer
//! refills the pool and hands each throttled queue just enough to run again. Exhaustion is
//! noticed where the kernel notices it: at `update_curr`, i.e. at the next scheduler tick, so a
//! group may overrun its silo by up to one tick per CPU and pays it back from the next period.
//! The cgroup's `cpu.stat` counters follow the kernel: nr_periods (periods while the timer is
//! active), nr_throttled (periods that found throttled queues), throttled_time (summed over
//! CPUs), nr_bursts and burst_time (consumption beyond quota in a period, counted at refill).

use crate::cfs_rq::{RqId, Throttle};
use crate::cgroup::CgId;
use crate::error::{Result, SpecError};
use crate::events::{Event, Ns};
use crate::node::Node;
use crate::topology::CpuId;

/// `sysctl_sched_cfs_bandwidth_slice`: runtime a CPU pulls from the pool at a time.
pub const BANDWIDTH_SLICE: i64 = 5_000_000;
/// `min_cfs_rq_runtime`: what an idle cfs_rq keeps; the rest goes back to the pool.
pub const MIN_CFS_RQ_RUNTIME: i64 = 1_000_000;
/// `cfs_bandwidth_slack_period`: delay before returned runtime is redistributed.
pub const SLACK_PERIOD: Ns = 5_000_000;
/// `min_bandwidth_expiration`: no slack distribution this close to the period refill.
pub const MIN_BANDWIDTH_EXPIRATION: Ns = 2_000_000;
/// Default cpu.cfs_period_us (100 ms).
pub const DEFAULT_PERIOD: Ns = 100_000_000;
/// Limits of `tg_set_cfs_bandwidth`: period and quota at least 1 ms, period at most 1 s.
pub const MIN_CFS_QUOTA_PERIOD: Ns = 1_000_000;
pub const MAX_CFS_QUOTA_PERIOD: Ns = 1_000_000_000;

/// The kernel's cpu.stat counters of a group with bandwidth control (cgroup v1 names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_time: u64,
    pub nr_bursts: u64,
    pub burst_time: u64,
}

impl CpuStat {
    pub fn since(&self, base: &CpuStat) -> CpuStat {
        CpuStat {
            nr_periods: self.nr_periods - base.nr_periods,
            nr_throttled: self.nr_throttled - base.nr_throttled,
            throttled_time: self.throttled_time - base.throttled_time,
            nr_bursts: self.nr_bursts - base.nr_bursts,
            burst_time: self.burst_time - base.burst_time,
        }
    }
}

/// A group's `cfs_bandwidth`.
#[derive(Debug, Clone)]
pub struct CfsBandwidth {
    /// cpu.cfs_quota_us in ns; None is "no limit" (RUNTIME_INF, quota -1).
    pub quota: Option<Ns>,
    pub period: Ns,
    /// cpu.cfs_burst_us in ns.
    pub burst: Ns,
    /// The global pool.
    pub runtime: Ns,
    /// The pool right after the last refill (burst accounting).
    pub runtime_snap: Ns,
    pub period_active: bool,
    /// No runtime was handed out since the last period timer.
    pub idle: bool,
    /// The period timer's expiry, as the hrtimer keeps it: the armed one while active, the
    /// next boundary after the last firing while quiet (the handler forwards before it decides
    /// to stop), so a restarted timer keeps its phase. Meaningless until `timer_set`.
    pub expires: Ns,
    /// The timer was armed once: before that its expiry is the one `init_cfs_bandwidth` gave
    /// it, `origin`.
    pub timer_set: bool,
    /// A time (ns from the start; may stand for one long before it) on this group's period
    /// grid: the timer's expiry when the group was created (`start_cfs_bandwidth`).
    pub origin: Ns,
    pub timer_gen: u64,
    pub slack_started: bool,
    /// Throttled queues, in the order they were throttled (distribution order).
    pub throttled_rqs: Vec<RqId>,
    /// Cumulative since time 0 (the kernel never resets cpu.stat).
    pub stat: CpuStat,
}

impl Default for CfsBandwidth {
    fn default() -> Self {
        CfsBandwidth {
            quota: None,
            period: DEFAULT_PERIOD,
            burst: 0,
            runtime: 0,
            runtime_snap: 0,
            period_active: false,
            idle: false,
            expires: 0,
            timer_set: false,
            origin: 0,
            timer_gen: 0,
            slack_started: false,
            throttled_rqs: vec![],
            stat: CpuStat::default(),
        }
    }
}

/// Check a bandwidth setting the way `tg_set_cfs_bandwidth` does; values in ns.
pub fn check_bandwidth(field: &str, quota: Option<Ns>, period: Ns, burst: Ns) -> Result<()> {
    let err = |why: String| Err(SpecError::new(field, why));
    if !(MIN_CFS_QUOTA_PERIOD..=MAX_CFS_QUOTA_PERIOD).contains(&period) {
        return err(format!(
            "cpu.cfs_period_us must be in 1000..=1000000 (got {})",
            period / 1000
        ));
    }
    if let Some(q) = quota {
        if q < MIN_CFS_QUOTA_PERIOD {
            return err(format!("cpu.cfs_quota_us must be -1 or >= 1000 (got {})", q / 1000));
        }
        if burst > q {
            return err(format!(
                "cpu.cfs_burst_us ({}) must not exceed cpu.cfs_quota_us ({}); set the quota first",
                burst / 1000,
                q / 1000
            ));
        }
    }
    Ok(())
}

impl Node {
    /// `account_cfs_rq_runtime`: charge `delta` to a queue's silo, refilling it from the pool
    /// when it runs dry.
    #[inline]
    pub(crate) fn account_cfs_rq_runtime(&mut self, rq: RqId, delta: u64) {
        if !self.rqs[rq].runtime_enabled {
            return;
        }
        let r = &mut self.rqs[rq];
        r.runtime_remaining -= delta as i64;
        if r.runtime_remaining > 0 {
            return;
        }
        self.assign_cfs_rq_runtime(rq);
    }

    /// `__assign_cfs_rq_runtime`: pull up to a slice (plus the overrun) from the pool.
    ///
    /// One shortcut, which cannot change who is throttled when: if the pool could refill a
    /// silo until the end of the period for every CPU the group may use (plus a slice and a
    /// tick each), no queue of the group can be throttled before the refill, so the silo is
    /// filled until then in one pull instead of one pull per 5 ms slice. Only the pool level
    /// between pulls differs from the kernel's (by less than a slice per CPU). It keeps
    /// generous or burst-padded quotas nearly free to simulate.
    pub(crate) fn assign_cfs_rq_runtime(&mut self, rq: RqId) -> bool {
        let cg = self.rqs[rq].cg;
        let mut min_amount = BANDWIDTH_SLICE - self.rqs[rq].runtime_remaining;
        self.start_cfs_bandwidth(cg);
        let until_refill = self.until_refresh(cg);
        let k = self.allowed_cpus(cg) as u64;
        let bw = &mut self.cgroups[cg].bw;
        let reserve = until_refill.saturating_add(BANDWIDTH_SLICE as u64 + self.tun.tick_ns);
        if until_refill != Ns::MAX && bw.runtime as u128 >= k as u128 * reserve as u128 {
            min_amount += until_refill as i64;
        }
        if bw.runtime > 0 {
            let amount = (bw.runtime as i64).min(min_amount);
            bw.runtime -= amount as u64;
            bw.idle = false;
            self.rqs[rq].runtime_remaining += amount;
        }
        self.rqs[rq].runtime_remaining > 0
    }

    /// Is the running task's hierarchy out of runtime somewhere (silo spent, pool empty)?
    pub(crate) fn bandwidth_exhausted(&mut self, cpu: CpuId) -> bool {
        let Some(t) = self.cpus[cpu].curr else { return false };
        let mut rq = self.ses[self.tasks[t].se].parent_rq;
        loop {
            let r = &self.rqs[rq];
            if r.runtime_enabled && r.runtime_remaining <= 0 && !self.assign_cfs_rq_runtime(rq) {
                return true;
            }
            match self.rqs[rq].gse {
                Some(g) => rq = self.ses[g].parent_rq,
                None => return false,
            }
        }
    }

    /// When the running task's silos run out, if nothing else changes: the first tick at or
    /// after the earliest exhaustion (the kernel notices it in the tick's `update_curr`).
    pub(crate) fn next_bandwidth_tick(&self, cpu: CpuId) -> Ns {
        let Some(t) = self.cpus[cpu].curr else { return Ns::MAX };
        let mut rq = self.ses[self.tasks[t].se].parent_rq;
        let mut left = i64::MAX;
        loop {
            let r = &self.rqs[rq];
            if r.runtime_enabled {
                left = left.min(r.runtime_remaining);
            }
            match r.gse {
                Some(g) => rq = self.ses[g].parent_rq,
                None => break,
            }
        }
        if left == i64::MAX {
            return Ns::MAX;
        }
        let tick = self.tun.tick_ns;
        let at = (self.now + left.max(0) as u64).max(self.now + 1);
        at.div_ceil(tick) * tick
    }

    /// `check_cfs_rq_runtime` on the queues of a task that just stopped running: throttle
    /// those whose silo is spent and cannot be refilled.
    pub(crate) fn check_cfs_rq_runtime_path(&mut self, t: usize) {
        let mut rq = self.ses[self.tasks[t].se].parent_rq;
        loop {
            let (enabled, remaining, throttled, gse) = {
                let r = &self.rqs[rq];
                (
                    r.runtime_enabled,
                    r.runtime_remaining,
                    r.throttled.has(Throttle::BANDWIDTH),
                    r.gse,
                )
            };
            if enabled && remaining <= 0 && !throttled && !self.assign_cfs_rq_runtime(rq) {
                self.throttle_bandwidth(rq);
            }
            match gse {
                Some(g) => rq = self.ses[g].parent_rq,
                None => break,
            }
        }
    }

    /// `check_enqueue_throttle`: a queue that gets its first entity while out of runtime is
    /// throttled at once (an active queue is handled by the put path).
    pub(crate) fn check_enqueue_throttle(&mut self, rq: RqId) {
        let r = &self.rqs[rq];
        if !r.runtime_enabled || r.curr.is_some() || r.throttled.has(Throttle::BANDWIDTH) || r.nr_running != 1 {
            return;
        }
        if r.runtime_remaining <= 0 && !self.assign_cfs_rq_runtime(rq) {
            self.throttle_bandwidth(rq);
        }
    }

    fn throttle_bandwidth(&mut self, rq: RqId) {
        let cg = self.rqs[rq].cg;
        self.throttle(rq, Throttle::BANDWIDTH);
        self.rqs[rq].throttled_at = self.now;
        self.cgroups[cg].bw.throttled_rqs.push(rq);
        self.start_cfs_bandwidth(cg);
        // Throttled online work no longer holds offline work off this CPU.
        self.non_idle_left(self.rqs[rq].cpu);
    }

    fn unthrottle_bandwidth(&mut self, rq: RqId) {
        let cg = self.rqs[rq].cg;
        let cpu = self.rqs[rq].cpu;
        let throttled_for = self.now - self.rqs[rq].throttled_at;
        self.cgroups[cg].bw.stat.throttled_time += throttled_for;
        self.unthrottle(rq, Throttle::BANDWIDTH);
        // unthrottle_cfs_rq: an idle CPU is kicked; a busy one picks the group up at its next
        // scheduling point.
        self.queue_changed(cpu);
    }

    /// `return_cfs_rq_runtime`: a queue that went empty gives back all but 1 ms of its silo,
    /// and the slack timer may hand it to throttled queues.
    pub(crate) fn return_cfs_rq_runtime(&mut self, rq: RqId) {
        let r = &self.rqs[rq];
        if !r.runtime_enabled || r.nr_running > 0 {
            return;
        }
        let slack = r.runtime_remaining - MIN_CFS_RQ_RUNTIME;
        if slack <= 0 {
            return;
        }
        let cg = r.cg;
        self.rqs[rq].runtime_remaining -= slack;
        let bw = &mut self.cgroups[cg].bw;
        if bw.quota.is_some() {
            bw.runtime += slack as u64;
            if bw.runtime > BANDWIDTH_SLICE as u64 && !bw.throttled_rqs.is_empty() {
                self.start_slack_timer(cg);
            }
        }
    }

    /// Time until the period timer fires next (Ns::MAX when inactive).
    fn until_refresh(&self, cg: CgId) -> Ns {
        let bw = &self.cgroups[cg].bw;
        if !bw.period_active {
            return Ns::MAX;
        }
        bw.expires.saturating_sub(self.now)
    }

    fn start_slack_timer(&mut self, cg: CgId) {
        if self.until_refresh(cg) < SLACK_PERIOD + MIN_BANDWIDTH_EXPIRATION || self.cgroups[cg].bw.slack_started {
            return;
        }
        self.cgroups[cg].bw.slack_started = true;
        let gen = self.cgroups[cg].bw.timer_gen;
        self.queue.push(self.now + SLACK_PERIOD, Event::Slack { cg, gen });
    }

    pub(crate) fn slack_timer(&mut self, cg: CgId, gen: u64) {
        if gen != self.cgroups[cg].bw.timer_gen {
            return;
        }
        self.cgroups[cg].bw.slack_started = false;
        if self.until_refresh(cg) < MIN_BANDWIDTH_EXPIRATION {
            return;
        }
        if self.cgroups[cg].bw.runtime > BANDWIDTH_SLICE as u64 {
            self.distribute_cfs_runtime(cg);
        }
    }

    /// `start_cfs_bandwidth`: `hrtimer_forward_now(period_timer, period)` then start it.
    ///
    /// The phase: `hrtimer_forward` only ever moves an expiry in whole periods, to the first
    /// one after now (an expiry still ahead stays as it is). The timer is first armed when the
    /// quota is written (`tg_set_cfs_bandwidth`), later whenever runtime is pulled while it is
    /// quiet; `sched_cfs_period_timer` forwards the same way before handling a period and
    /// stops after an idle one (`period_active = 0`), so a group's boundaries stay on one grid
    /// for its life, anchored at the expiry `init_cfs_bandwidth` gave the timer. Since Linux 6.4
    /// (41abdba93747, "sched: Interleave cfs bandwidth timers ...") that is
    /// `get_random_u32_below(period)`, so every group has its own random phase; before, the
    /// zeroed expiry put every group on CLOCK_MONOTONIC's multiples of its period. Either way
    /// the phase is arbitrary to when a workload starts. Here each group's grid is `origin` +
    /// k × period: drawn from the seed per group, or pinned by the scenario (bandwidth.rs
    /// tests; tests/test_replay_host.py measures it on the host).
    pub(crate) fn start_cfs_bandwidth(&mut self, cg: CgId) {
        let bw = &mut self.cgroups[cg].bw;
        if bw.period_active || bw.quota.is_none() {
            return;
        }
        bw.period_active = true;
        if !bw.timer_set {
            bw.timer_set = true;
            bw.expires = bw.origin % bw.period;
        }
        if bw.expires <= self.now {
            bw.expires += ((self.now - bw.expires) / bw.period + 1) * bw.period;
        }
        bw.timer_gen += 1;
        let gen = bw.timer_gen;
        self.queue.push(bw.expires, Event::Period { cg, gen });
    }

    /// `__refill_cfs_bandwidth_runtime`: add a quota, count what the last period used beyond
    /// its quota as burst, cap the pool at quota + burst.
    fn refill(&mut self, cg: CgId) {
        let bw = &mut self.cgroups[cg].bw;
        let Some(quota) = bw.quota else { return };
        bw.runtime += quota;
        if bw.runtime_snap > bw.runtime {
            bw.stat.burst_time += bw.runtime_snap - bw.runtime;
            bw.stat.nr_bursts += 1;
        }
        bw.runtime = bw.runtime.min(quota + bw.burst);
        bw.runtime_snap = bw.runtime;
    }

    /// `do_sched_cfs_period_timer`.
    pub(crate) fn period_timer(&mut self, cg: CgId, gen: u64) {
        if gen != self.cgroups[cg].bw.timer_gen || !self.cgroups[cg].bw.period_active {
            return;
        }
        let bw = &mut self.cgroups[cg].bw;
        // sched_cfs_period_timer forwards the expiry before handling the period, so even a
        // timer that now goes quiet remembers the next boundary.
        bw.expires = self.now + bw.period;
        bw.stat.nr_periods += 1;
        let throttled = !bw.throttled_rqs.is_empty();
        self.refill(cg);
        let bw = &mut self.cgroups[cg].bw;
        if bw.idle && !throttled {
            bw.period_active = false; // the timer goes quiet after a full idle period
            return;
        }
        if throttled {
            bw.stat.nr_throttled += 1;
        }
        bw.idle = !throttled;
        let at = bw.expires;
        self.queue.push(at, Event::Period { cg, gen });
        if throttled {
            self.distribute_cfs_runtime(cg);
            self.cgroups[cg].bw.idle = false;
        }
    }

    /// `distribute_cfs_runtime`: in throttling order, give each throttled queue just enough to
    /// run (its deficit + 1 ns) while the pool lasts, and unthrottle it.
    fn distribute_cfs_runtime(&mut self, cg: CgId) {
        let list = std::mem::take(&mut self.cgroups[cg].bw.throttled_rqs);
        let mut still = vec![];
        for rq in list {
            let pool = self.cgroups[cg].bw.runtime;
            if pool == 0 {
                still.push(rq);
                continue;
            }
            let need = (-self.rqs[rq].runtime_remaining + 1) as u64;
            let give = need.min(pool);
            self.cgroups[cg].bw.runtime -= give;
            self.rqs[rq].runtime_remaining += give as i64;
            if self.rqs[rq].runtime_remaining > 0 {
                self.unthrottle_bandwidth(rq);
            } else {
                still.push(rq);
            }
        }
        let bw = &mut self.cgroups[cg].bw;
        still.append(&mut bw.throttled_rqs);
        bw.throttled_rqs = still;
    }

    /// `tg_set_cfs_bandwidth`: new quota/period/burst (ns): refill, restart the timer, reset
    /// every CPU's silo and unthrottle what was throttled.
    pub(crate) fn set_bandwidth(&mut self, cg: CgId, quota: Option<Ns>, period: Ns, burst: Ns) {
        let ncpus = self.ncpus();
        self.settle();
        let bw = &mut self.cgroups[cg].bw;
        bw.quota = quota;
        bw.period = period;
        bw.burst = burst;
        bw.timer_gen += 1; // a new period timer (and slack timer) replaces the old
        bw.period_active = false;
        bw.slack_started = false;
        self.refill(cg);
        if quota.is_some() {
            self.start_cfs_bandwidth(cg);
        }
        let throttled = std::mem::take(&mut self.cgroups[cg].bw.throttled_rqs);
        for cpu in 0..ncpus {
            let rq = cg * ncpus + cpu;
            self.rqs[rq].runtime_enabled = quota.is_some();
            self.rqs[rq].runtime_remaining = 0;
        }
        for rq in throttled {
            self.unthrottle_bandwidth(rq);
        }
        // Running tasks now have silos to spend: plan when they run out.
        for cpu in 0..ncpus {
            self.reprogram(cpu);
        }
    }
}

impl Node {
    /// The v1 hierarchy rule (`tg_cfs_schedulable_down`): a group's quota per period may not
    /// exceed its nearest limited ancestor's; "no limit" inherits the parent's. Checked for
    /// `cg` taking (quota, period) and for every limited descendant under the new value.
    pub(crate) fn check_quota_hierarchy(&self, cg: CgId, quota: Option<Ns>, period: Ns) -> Result<()> {
        // Effective limit of each cgroup as a ratio of CPUs (None = unlimited), parents first.
        let mut eff: Vec<Option<f64>> = vec![None; self.cgroups.len()];
        for g in 1..self.cgroups.len() {
            let (q, p) = if g == cg {
                (quota, period)
            } else {
                (self.cgroups[g].bw.quota, self.cgroups[g].bw.period)
            };
            let parent = eff[self.cgroups[g].parent.unwrap()];
            let own = q.map(|q| q as f64 / p as f64);
            eff[g] = match (own, parent) {
                (None, p) => p,
                (Some(o), Some(p)) if o > p + 1e-12 => {
                    let name = &self.cgroups[g].name;
                    return Err(SpecError::new(
                        format!("cgroups.{name}.cpu.cfs_quota_us"),
                        format!(
                            "{:.3} CPUs exceeds the {:.3} CPUs its parent allows (cgroup v1 rejects a child quota above its parent's)",
                            o, p
                        ),
                    ));
                }
                (Some(o), _) => Some(o),
            };
        }
        Ok(())
    }

    /// Write cpu.cfs_quota_us / cpu.cfs_period_us / cpu.cfs_burst_us (µs) at run time.
    pub(crate) fn write_bandwidth_knob(&mut self, cg: CgId, knob: &str, value: i64) -> Result<()> {
        let bw = &self.cgroups[cg].bw;
        let mut us = [
            bw.quota.map(|q| (q / 1000) as i64).unwrap_or(-1),
            (bw.period / 1000) as i64,
            (bw.burst / 1000) as i64,
        ];
        let idx = ["cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us"]
            .iter()
            .position(|k| *k == knob)
            .unwrap();
        us[idx] = value;
        let (quota, period, burst) = crate::spec::bandwidth_ns(knob, us[0], us[1], us[2])?;
        self.check_quota_hierarchy(cg, quota, period)?;
        self.set_bandwidth(cg, quota, period, burst);
        Ok(())
    }

    pub(crate) fn read_bandwidth_knob(&self, cg: CgId, knob: &str) -> Option<i64> {
        let bw = &self.cgroups[cg].bw;
        match knob {
            "cpu.cfs_quota_us" => Some(bw.quota.map(|q| (q / 1000) as i64).unwrap_or(-1)),
            "cpu.cfs_period_us" => Some((bw.period / 1000) as i64),
            "cpu.cfs_burst_us" => Some((bw.burst / 1000) as i64),
            _ => None,
        }
    }
}
