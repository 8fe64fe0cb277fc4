//! EEVDF, the fair class of Linux 6.6 and later (Documentation/scheduler/sched-eevdf.rst;
//! fair.c `avg_vruntime`, `entity_eligible`, `pick_eevdf`, `pick_next_entity`, `place_entity`,
//! `update_deadline`, `update_entity_lag`, `reweight_entity`, `set_protect_slice`,
//! `dequeue_entity`, `requeue_delayed_entity`, `check_preempt_wakeup_fair`;
//! kernel-and-anchors.md §A6), behind the same hooks as CFS in `cfs.rs`: placement, pick,
//! tick, wakeup preemption, reweight. The hierarchy, bandwidth, qos_level and idle rules are
//! shared. Which release's EEVDF runs is `[kernel] version` + `sched_features`
//! (sched_features.rs).
//!
//! An entity is eligible when its vruntime is not ahead of the queue's load-weighted average
//! V (lag ≥ 0); V comes from running sums kept at every timeline change, as the kernel keeps
//! them, so the test is O(1). Among eligible entities the earliest virtual deadline runs, the
//! deadline being vruntime + base_slice × NICE_0 / weight. A running entity whose vruntime
//! reaches its deadline gets a new one and, with company, is rescheduled — noticed in
//! `update_curr`, i.e. at the tick or when a wakeup updates the queue. Entities keep their
//! lag across sleep and migration (PLACE_LAG) and a new one starts with half a slice
//! (PLACE_DEADLINE_INITIAL); RUN_TO_PARITY protects the running entity's slice from wakeups
//! up to `vprot`.
//!
//! 6.12+: DELAY_DEQUEUE keeps a sleeping entity that is not eligible queued (it still counts
//! in the load and in V) until it is picked — then it leaves, with DELAY_ZERO dropping a
//! positive lag — or woken, when it is requeued in place on its CPU. A task's sleep that
//! leaves company in its group makes the group entity the next buddy, which PICK_BUDDY picks
//! while eligible. PLACE_REL_DEADLINE carries deadline − vruntime across a migration.
//! 6.14 – 6.18.44 `reweight_entity` re-places the entity (see `Reweight::Replace`).
//! Not modelled: per-task custom slices (so PREEMPT_SHORT, which needs a shorter slice,
//! never fires), delayed tasks moved by load balancing (they stay until picked or woken).

use crate::cfs::calc_delta_fair;
use crate::cfs_rq::{RqId, SeId};
use crate::events::Ns;
use crate::node::Node;
use crate::sched_features::Reweight;
use crate::topology::CpuId;
use crate::tunables::scale_load_down;
use crate::workload::TaskId;

impl Node {
    /// (Σ w_i (v_i − v0), Σ w_i) over the queue, v0 = min_vruntime, w unscaled: the running
    /// sums of the timeline plus the running entity when it is still queued (`avg_vruntime`).
    fn avg_parts(&self, rq: RqId) -> (i128, i128) {
        let r = &self.rqs[rq];
        let (mut avg, mut load) = (r.sum_wkey, r.sum_w);
        if let Some(c) = r.curr.filter(|&c| self.ses[c].on_rq) {
            let w = scale_load_down(self.ses[c].weight) as i128;
            avg += w * (self.ses[c].vruntime - r.min_vruntime) as i128;
            load += w;
        }
        (avg, load)
    }

    /// V, the load-weighted average vruntime of the queue (`avg_vruntime`).
    pub fn avg_vruntime(&self, rq: RqId) -> i64 {
        let (avg, load) = self.avg_parts(rq);
        let v0 = self.rqs[rq].min_vruntime;
        if load == 0 {
            return v0;
        }
        // Round toward −∞ like the kernel's div_s64 on a biased sum ("sign flip").
        v0 + avg.div_euclid(load) as i64
    }

    /// `vruntime_eligible`: v ≤ V, compared without division.
    pub(crate) fn eligible(&self, rq: RqId, se: SeId) -> bool {
        let (avg, load) = self.avg_parts(rq);
        avg >= (self.ses[se].vruntime - self.rqs[rq].min_vruntime) as i128 * load
    }

    pub(crate) fn vslice(&self, se: SeId) -> i64 {
        calc_delta_fair(self.tun.base_slice, self.ses[se].weight)
    }

    /// `protect_slice`: the running entity has not yet reached its protected vruntime.
    fn protect_slice(&self, se: SeId) -> bool {
        self.ses[se].vruntime < self.ses[se].vprot
    }

    /// `set_protect_slice` when `se` is picked: RUN_TO_PARITY protects it up to its deadline
    /// (6.6 – 6.16) or at most the shortest queued slice further (6.17+, min(deadline,
    /// v + min_slice × NICE_0 / w); every entity's slice is base_slice here).
    pub(crate) fn set_protect_slice(&mut self, se: SeId) {
        let f = self.tun.feat;
        let s = &self.ses[se];
        let vprot = if !f.run_to_parity {
            i64::MIN
        } else if f.protect_min_slice {
            s.deadline.min(s.vruntime + self.vslice(se))
        } else {
            s.deadline
        };
        self.ses[se].vprot = vprot;
    }

    /// `pick_eevdf`: the eligible entity with the earliest deadline; `curr` (running, still
    /// queued) competes too and keeps the CPU while its slice is protected (RUN_TO_PARITY),
    /// unless `protect` is off (PREEMPT_SHORT's pick).
    pub(crate) fn pick_eevdf(&self, rq: RqId, protect: bool) -> Option<SeId> {
        let r = &self.rqs[rq];
        let curr = r.curr.filter(|&c| self.ses[c].on_rq && self.eligible(rq, c));
        if let Some(c) = curr {
            if protect && self.protect_slice(c) {
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

    /// `pick_next_entity`: the next buddy while it is eligible (PICK_BUDDY), else `pick_eevdf`.
    pub(crate) fn pick_next_entity(&self, rq: RqId) -> Option<SeId> {
        if self.tun.feat.pick_buddy {
            if let Some(n) = self.rqs[rq].next {
                if self.eligible(rq, n) {
                    return Some(n);
                }
            }
        }
        self.pick_eevdf(rq, true)
    }

    /// `place_entity`: v = V − lag × (W + w) / W, so that the lag survives the entity's own
    /// effect on V (PLACE_LAG; W counts the running entity — for the running entity itself,
    /// which 6.18.44's reweight places, that counts it twice); the deadline is a slice (half
    /// for a new one, PLACE_DEADLINE_INITIAL) ahead, or the relative deadline it carried
    /// (PLACE_REL_DEADLINE).
    pub(crate) fn place_eevdf(&mut self, rq: RqId, se: SeId, initial: bool) {
        let f = self.tun.feat;
        let vrun = self.avg_vruntime(rq);
        let mut lag = 0i64;
        if f.place_lag && self.rqs[rq].nr_running > 0 && self.ses[se].vlag != 0 {
            let (_, load) = self.avg_parts(rq);
            let w = scale_load_down(self.ses[se].weight) as i128;
            lag = (self.ses[se].vlag as i128 * (load + w) / load.max(1)) as i64;
        }
        let mut vslice = self.vslice(se);
        if initial && f.place_deadline_initial {
            vslice /= 2;
        }
        let s = &mut self.ses[se];
        s.vruntime = vrun - lag;
        if std::mem::take(&mut s.rel_deadline) {
            s.deadline += s.vruntime;
        } else {
            s.deadline = s.vruntime + vslice;
        }
        s.vprot = i64::MIN;
    }

    /// `update_entity_lag` at dequeue: lag = V − v, clamped to ±max(2 slices, a tick) in the
    /// entity's virtual time.
    pub(crate) fn save_lag(&mut self, rq: RqId, se: SeId) {
        let lag = self.avg_vruntime(rq) - self.ses[se].vruntime;
        let limit = self.lag_limit(self.ses[se].weight);
        self.ses[se].vlag = lag.clamp(-limit, limit);
    }

    /// The lag limit of `update_entity_lag`: ±max(2 slices, a tick) in the entity's virtual time.
    fn lag_limit(&self, weight: u64) -> i64 {
        calc_delta_fair((2 * self.tun.base_slice).max(self.tun.tick_ns), weight)
    }

    /// `reweight_entity` for EEVDF. A dequeued entity rescales its stored lag. A queued one,
    /// by the release (`Reweight`): `reweight_eevdf` keeps V invariant — the lag (clamped) and
    /// the distance to the deadline keep their real-time size; 6.14 – 6.18.44 take the entity
    /// out of the sums (the running one stays in them), rescale lag and relative deadline and
    /// `place_entity` it again. Either way the running entity loses its slice protection
    /// (6.18.44 keeps vprot in the storage of vlag, which update_entity_lag overwrites).
    pub(crate) fn reweight_eevdf(&mut self, rq: RqId, se: SeId, new_w: u64) {
        let old_w = self.ses[se].weight;
        let scale = |x: i64| (x as i128 * old_w as i128 / new_w as i128) as i64;
        if !self.ses[se].on_rq {
            let lag = scale(self.ses[se].vlag);
            let limit = self.lag_limit(new_w);
            self.ses[se].vlag = lag.clamp(-limit, limit);
            return;
        }
        let in_tree = self.rqs[rq].curr != Some(se);
        let key = (self.ses[se].vruntime, se);
        self.save_lag(rq, se);
        if in_tree {
            self.rqs[rq].remove(key.0, se, scale_load_down(old_w));
        }
        match self.tun.feat.reweight {
            Reweight::Invariant => {
                let v_avg = self.avg_vruntime_with(rq, se, key.0, old_w, in_tree);
                let s = &mut self.ses[se];
                let rel_deadline = s.deadline - s.vruntime;
                s.vruntime = v_avg - scale(s.vlag);
                s.deadline = s.vruntime + scale(rel_deadline);
                s.weight = new_w;
            }
            Reweight::Replace => {
                let s = &mut self.ses[se];
                s.deadline -= s.vruntime;
                s.rel_deadline = true;
                s.vlag = scale(s.vlag);
                s.deadline = scale(s.deadline);
                s.weight = new_w;
                self.place_eevdf(rq, se, false);
            }
        }
        self.ses[se].vprot = i64::MIN;
        if in_tree {
            let (v, w) = (self.ses[se].vruntime, scale_load_down(new_w));
            self.rqs[rq].insert(v, se, w);
        }
    }

    /// V as it was with `se` (at vruntime `v`, weight `w`) still counted, after it left the
    /// sums (`in_tree`) — the V that `reweight_eevdf` keeps.
    fn avg_vruntime_with(&self, rq: RqId, se: SeId, v: i64, w: u64, in_tree: bool) -> i64 {
        if !in_tree {
            return self.avg_vruntime(rq);
        }
        let (mut avg, mut load) = self.avg_parts(rq);
        let wd = scale_load_down(w) as i128;
        avg += wd * (v - self.rqs[rq].min_vruntime) as i128;
        load += wd;
        debug_assert!(self.ses[se].on_rq);
        self.rqs[rq].min_vruntime + avg.div_euclid(load.max(1)) as i64
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
    /// hierarchies meet, preempt iff `pick_eevdf` now chooses the waker's entity; a waker with
    /// a shorter slice (PREEMPT_SHORT) is judged without the running entity's protection.
    pub(crate) fn eevdf_wakeup_preempts(&self, se: SeId, pse: SeId) -> bool {
        let rq = self.ses[se].parent_rq;
        // Every entity's slice is base_slice here: a waker is never shorter.
        let shorter = false;
        let protect = !(self.tun.feat.preempt_short && shorter);
        self.pick_eevdf(rq, protect) == Some(pse)
    }

    /// `dequeue_entity`'s DELAY_DEQUEUE test: a sleeping entity that is not eligible stays
    /// queued as sched_delayed.
    pub(crate) fn delays_dequeue(&self, rq: RqId, se: SeId) -> bool {
        self.eevdf() && self.tun.feat.delay_dequeue && !self.eligible(rq, se)
    }

    /// `finish_delayed_dequeue_entity` on top of the dequeue's `update_entity_lag`: DELAY_ZERO
    /// keeps at most zero lag for a delayed entity that leaves.
    pub(crate) fn finish_delayed_lag(&mut self, se: SeId) {
        let s = &mut self.ses[se];
        s.delayed = false;
        if self.tun.feat.delay_zero && s.vlag > 0 {
            s.vlag = 0;
        }
    }

    /// `requeue_delayed_entity`: a delayed entity woken where it sits. DELAY_ZERO: with a
    /// positive lag it is placed again at V (zero lag); otherwise it keeps its vruntime and
    /// deadline.
    pub(crate) fn requeue_delayed_entity(&mut self, se: SeId) {
        let rq = self.ses[se].parent_rq;
        if self.tun.feat.delay_zero {
            self.save_lag(rq, se);
            if self.ses[se].vlag > 0 {
                let in_tree = self.rqs[rq].curr != Some(se);
                let (v, w) = (self.ses[se].vruntime, scale_load_down(self.ses[se].weight));
                if in_tree {
                    self.rqs[rq].remove(v, se, w);
                }
                self.rqs[rq].nr_running -= 1;
                self.ses[se].vlag = 0;
                self.place_eevdf(rq, se, false);
                self.rqs[rq].nr_running += 1;
                if in_tree {
                    let v = self.ses[se].vruntime;
                    self.rqs[rq].insert(v, se, w);
                }
            }
        }
        self.ses[se].delayed = false;
    }

    /// `set_next_buddy`: `se` and its ancestors become their queues' next buddies (an idle
    /// entity stops the walk).
    pub(crate) fn set_next_buddy(&mut self, mut se: SeId) {
        loop {
            if !self.ses[se].on_rq || self.se_is_idle(se) {
                return;
            }
            let rq = self.ses[se].parent_rq;
            self.rqs[rq].next = Some(se);
            match self.rqs[rq].gse {
                Some(g) => se = g,
                None => return,
            }
        }
    }

    /// `clear_buddies` (`__clear_buddies_next`): `se` leaves; it and the ancestors it was
    /// next buddy through stop being next.
    pub(crate) fn clear_buddies(&mut self, mut se: SeId) {
        loop {
            let rq = self.ses[se].parent_rq;
            if self.rqs[rq].next != Some(se) {
                return;
            }
            self.rqs[rq].next = None;
            match self.rqs[rq].gse {
                Some(g) => se = g,
                None => return,
            }
        }
    }

    /// `throttled_hierarchy`: `rq` or a queue above it is throttled.
    pub(crate) fn throttled_hierarchy(&self, mut rq: RqId) -> bool {
        loop {
            if self.rqs[rq].throttled.any() {
                return true;
            }
            match self.rqs[rq].gse {
                Some(g) => rq = self.ses[g].parent_rq,
                None => return false,
            }
        }
    }

    /// Whether task `t` is asleep but still queued (DELAY_DEQUEUE).
    pub(crate) fn task_delayed(&self, t: TaskId) -> bool {
        self.ses[self.tasks[t].se].delayed
    }

    /// A delayed task must leave for good (it dies, its cgroup or cpuset changes): the dequeue
    /// `pick_next_entity` would have done.
    pub(crate) fn finish_delayed_task(&mut self, t: TaskId) {
        let se = self.tasks[t].se;
        if self.ses[se].delayed {
            let cpu = self.rqs[self.ses[se].parent_rq].cpu;
            self.finish_delayed(se);
            if self.cpus[cpu].curr.is_some() {
                self.reprogram(cpu);
            }
        }
    }
}

