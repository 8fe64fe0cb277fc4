//! EEVDF, the fair class of Linux 6.6 and later (Documentation/scheduler/sched-eevdf.rst;
//! fair.c `avg_vruntime`, `entity_eligible`, `pick_eevdf`, `place_entity`, `update_deadline`,
//! `update_entity_lag`, `reweight_eevdf`, `check_preempt_wakeup_fair`; kernel-and-anchors.md
//! §A6), behind the same hooks as CFS in `cfs.rs`: placement, pick, tick, wakeup preemption,
//! reweight. The hierarchy, bandwidth, qos_level and idle rules are shared.
//!
//! An entity is eligible when its vruntime is not ahead of the queue's load-weighted average
//! V (lag ≥ 0); among eligible entities the earliest virtual deadline runs, the deadline being
//! vruntime + base_slice × NICE_0 / weight. A running entity whose vruntime reaches its
//! deadline gets a new one and, with company, is rescheduled — noticed in `update_curr`,
//! i.e. at the tick or when a wakeup updates the queue. Entities keep their lag across sleep
//! and migration (PLACE_LAG) and a new one starts with half a slice (PLACE_DEADLINE_INITIAL);
//! RUN_TO_PARITY protects the running entity's slice from wakeups.
//! Not modelled: DELAY_DEQUEUE (6.12), per-task custom slices and PREEMPT_SHORT.

use crate::cfs::calc_delta_fair;
use crate::cfs_rq::{RqId, SeId};
use crate::events::Ns;
use crate::node::Node;
use crate::topology::CpuId;
use crate::tunables::scale_load_down;
use crate::workload::TaskId;

impl Node {
    /// Queued entities of a queue, the running one included when it is still queued.
    fn queued(&self, rq: RqId) -> impl Iterator<Item = SeId> + '_ {
        let r = &self.rqs[rq];
        r.timeline
            .iter()
            .map(|&(_, s)| s)
            .chain(r.curr.filter(|&c| self.ses[c].on_rq))
    }

    /// (Σ w_i (v_i − v0), Σ w_i) over the queue, v0 = min_vruntime, w unscaled
    /// (`avg_vruntime` / `avg_load`).
    fn avg_parts(&self, rq: RqId) -> (i128, i128) {
        let v0 = self.rqs[rq].min_vruntime;
        let mut avg = 0i128;
        let mut load = 0i128;
        for s in self.queued(rq) {
            let w = scale_load_down(self.ses[s].weight) as i128;
            avg += w * (self.ses[s].vruntime - v0) as i128;
            load += w;
        }
        (avg, load)
    }

    /// V, the load-weighted average vruntime of the queue (`avg_vruntime`).
    pub(crate) fn avg_vruntime(&self, rq: RqId) -> i64 {
        let (avg, load) = self.avg_parts(rq);
        let v0 = self.rqs[rq].min_vruntime;
        if load == 0 {
            return v0;
        }
        // Round toward −∞ like the kernel's div_s64 on a biased sum ("sign flip").
        v0 + avg.div_euclid(load) as i64
    }

    /// `vruntime_eligible`: v ≤ V, compared without division.
    fn eligible(&self, rq: RqId, se: SeId) -> bool {
        let (avg, load) = self.avg_parts(rq);
        avg >= (self.ses[se].vruntime - self.rqs[rq].min_vruntime) as i128 * load
    }

    pub(crate) fn vslice(&self, se: SeId) -> i64 {
        calc_delta_fair(self.tun.base_slice, self.ses[se].weight)
    }

    /// `pick_eevdf`: the eligible entity with the earliest deadline; `curr` (running, still
    /// queued) competes too and keeps the CPU while its slice is protected (RUN_TO_PARITY).
    pub(crate) fn pick_eevdf(&self, rq: RqId) -> Option<SeId> {
        let r = &self.rqs[rq];
        let curr = r.curr.filter(|&c| self.ses[c].on_rq && self.eligible(rq, c));
        if let Some(c) = curr {
            if self.ses[c].protected {
                return Some(c);
            }
        }
        // The timeline is ordered by vruntime, so the eligible entities are a prefix of it.
        let mut best: Option<SeId> = None;
        for &(_, s) in r.timeline.iter() {
            if !self.eligible(rq, s) {
                break;
            }
            if best.is_none_or(|b| self.ses[s].deadline < self.ses[b].deadline) {
                best = Some(s);
            }
        }
        match (best, curr) {
            (None, c) => c.or_else(|| r.leftmost().map(|(_, s)| s)),
            (Some(b), Some(c)) if self.ses[c].deadline < self.ses[b].deadline => Some(c),
            (b, _) => b,
        }
    }

    /// `place_entity` (PLACE_LAG, PLACE_DEADLINE_INITIAL): v = V − lag × (W + w) / W, so the
    /// lag survives the entity's own effect on V; the deadline is a slice (half for a new one)
    /// ahead.
    pub(crate) fn place_eevdf(&mut self, rq: RqId, se: SeId, initial: bool) {
        let vrun = self.avg_vruntime(rq);
        let mut lag = 0i64;
        if self.rqs[rq].nr_running > 0 {
            let load: i128 = self
                .queued(rq)
                .map(|s| scale_load_down(self.ses[s].weight) as i128)
                .sum();
            let w = scale_load_down(self.ses[se].weight) as i128;
            lag = (self.ses[se].vlag as i128 * (load + w) / load.max(1)) as i64;
        }
        let mut vslice = self.vslice(se);
        if initial {
            vslice /= 2;
        }
        let s = &mut self.ses[se];
        s.vruntime = vrun - lag;
        s.deadline = s.vruntime + vslice;
        s.protected = false;
    }

    /// `update_entity_lag` at dequeue: lag = V − v, clamped to ±max(2 slices, a tick) in the
    /// entity's virtual time.
    pub(crate) fn save_lag(&mut self, rq: RqId, se: SeId) {
        let lag = self.avg_vruntime(rq) - self.ses[se].vruntime;
        let limit = self.lag_limit(self.ses[se].weight);
        self.ses[se].vlag = lag.clamp(-limit, limit);
    }

    /// `reweight_eevdf`: keep the entity's lag and its distance to the deadline in real time
    /// when its weight changes (`reweight_entity`; a dequeued one rescales its stored lag).
    /// The lag limit of `entity_lag`: ±max(2 slices, a tick) in the entity's virtual time.
    fn lag_limit(&self, weight: u64) -> i64 {
        calc_delta_fair((2 * self.tun.base_slice).max(self.tun.tick_ns), weight)
    }

    pub(crate) fn reweight_eevdf(&mut self, rq: RqId, se: SeId, new_w: u64) {
        let old_w = self.ses[se].weight;
        let scale = |x: i64| (x as i128 * old_w as i128 / new_w as i128) as i64;
        if !self.ses[se].on_rq {
            let lag = scale(self.ses[se].vlag);
            let limit = self.lag_limit(new_w);
            self.ses[se].vlag = lag.clamp(-limit, limit);
            return;
        }
        // 6.12 `reweight_entity`: update_entity_lag (clamped), then re-place with the lag and
        // the relative deadline rescaled, so repeated weight swings cannot grow the distance.
        let v_avg = self.avg_vruntime(rq);
        let in_tree = self.rqs[rq].curr != Some(se);
        if in_tree {
            let key = (self.ses[se].vruntime, se);
            self.rqs[rq].timeline.remove(&key);
        }
        let limit = self.lag_limit(old_w);
        let lag = (v_avg - self.ses[se].vruntime).clamp(-limit, limit);
        let s = &mut self.ses[se];
        let rel_deadline = s.deadline - s.vruntime;
        s.vruntime = v_avg - scale(lag);
        s.deadline = s.vruntime + scale(rel_deadline);
        if in_tree {
            let key = (self.ses[se].vruntime, se);
            self.rqs[rq].timeline.insert(key);
        }
    }

    /// vruntime of the running entity `se` at the last scheduler tick, if the task has been
    /// running since then (deadlines are renewed in the tick's `update_curr`).
    fn v_at_last_tick(&self, cpu: CpuId, t: TaskId, se: SeId) -> Option<i64> {
        let tick = self.tun.tick_ns;
        let last_tick = self.now / tick * tick;
        if last_tick < self.tasks[t].last_ran || self.cpus[cpu].curr != Some(t) {
            return None;
        }
        Some(self.ses[se].vruntime - calc_delta_fair(self.now - last_tick, self.ses[se].weight))
    }

    /// `update_deadline` for every entity of the running task's hierarchy, as the kernel's
    /// `update_curr` calls since the last look would have done. Returns whether a level with
    /// company got a new slice (the running task is then rescheduled).
    pub(crate) fn eevdf_renew(&mut self, cpu: CpuId) -> bool {
        let Some(t) = self.cpus[cpu].curr else { return false };
        let mut se = self.tasks[t].se;
        let mut resched = false;
        loop {
            if self.ses[se].vruntime >= self.ses[se].deadline {
                let vslice = self.vslice(se);
                if let Some(vt) = self.v_at_last_tick(cpu, t, se) {
                    if vt >= self.ses[se].deadline {
                        self.ses[se].deadline = vt + vslice;
                    }
                }
                if self.ses[se].vruntime >= self.ses[se].deadline {
                    self.ses[se].deadline = self.ses[se].vruntime + vslice;
                }
                self.ses[se].protected = false;
                let rq = self.ses[se].parent_rq;
                if self.rqs[rq].nr_running > 1 {
                    resched = true;
                }
            }
            match self.parent_se(se) {
                Some(g) => se = g,
                None => return resched,
            }
        }
    }

    /// The first tick at which some level of the running task with company reaches its
    /// deadline (its slice is used up), if nothing else changes.
    pub(crate) fn eevdf_next_tick(&self, cpu: CpuId) -> Ns {
        let Some(t) = self.cpus[cpu].curr else { return Ns::MAX };
        let mut se = self.tasks[t].se;
        let mut wait = u64::MAX;
        loop {
            let rq = self.ses[se].parent_rq;
            if self.rqs[rq].nr_running > 1 {
                let s = &self.ses[se];
                let ahead = s.deadline - s.vruntime;
                let w = if ahead <= 0 {
                    0
                } else {
                    (ahead as u128 * s.weight as u128).div_ceil(crate::tunables::NICE_0_LOAD as u128) as u64
                };
                wait = wait.min(w);
            }
            match self.parent_se(se) {
                Some(g) => se = g,
                None => break,
            }
        }
        if wait == u64::MAX {
            return Ns::MAX;
        }
        let tick = self.tun.tick_ns;
        let at = self.now.saturating_add(wait).max(self.now + 1);
        at.div_ceil(tick).saturating_mul(tick)
    }

    /// `check_preempt_wakeup_fair` after the idle rules: at the level where the two
    /// hierarchies meet, preempt iff `pick_eevdf` now chooses the waker's entity.
    pub(crate) fn eevdf_wakeup_preempts(&self, se: SeId, pse: SeId) -> bool {
        let rq = self.ses[se].parent_rq;
        self.pick_eevdf(rq) == Some(pse)
    }
}
