//! The CFS fair class (Linux ≤ 6.5 `kernel/sched/fair.c`), hierarchical: enqueue/dequeue
//! through the group entities, vruntime and min_vruntime, `place_entity`, `calc_group_shares`,
//! `sched_slice`, tick and wakeup preemption, SCHED_IDLE / cpu.idle rules and openEuler's
//! qos_level = -1 absolute preemption. Constants and rules: kernel-and-anchors.md §A1–§A4, §A7.

use crate::cfs_rq::{RqId, SeId, SeKind, Throttle};
use crate::cgroup::{CgId, ROOT};
use crate::events::Ns;
use crate::node::{Node, TaskState, SPEED_ONE, SPEED_SHIFT};
use crate::pelt;
use crate::topology::CpuId;
use crate::tunables::{scale_load_down, NICE_0_LOAD};
use crate::workload::TaskId;

/// How a task enters a run queue (the kernel's ENQUEUE_* flags that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    /// Woken from sleep: sleeper credit via `place_entity(initial = 0)`.
    Wakeup,
    /// A new task: START_DEBIT, one virtual slice behind min_vruntime.
    New,
    /// Moved by balancing: its vruntime was stored relative to the old queue's min_vruntime.
    Migrate,
}

/// How an entity leaves its run queue (the kernel's DEQUEUE_* flags that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dequeue {
    /// The task blocks (DEQUEUE_SLEEP): EEVDF may delay it (DELAY_DEQUEUE).
    Sleep,
    /// Moved to another CPU or re-queued after a change: not a sleep (PLACE_REL_DEADLINE).
    Migrate,
    /// A delayed entity leaves at last (DEQUEUE_SLEEP | DEQUEUE_DELAYED).
    Delayed,
    /// A group is throttled (DEQUEUE_SLEEP | DEQUEUE_SPECIAL): never delayed.
    Special,
}

/// Deepest cgroup nesting the pick path supports.
pub const MAX_DEPTH: usize = 32;

/// Δvruntime = Δexec × NICE_0_LOAD / weight (`calc_delta_fair`; both scaled).
#[inline]
pub fn calc_delta_fair(delta: u64, weight: u64) -> i64 {
    if weight == NICE_0_LOAD {
        delta as i64
    } else {
        crate::arith::div(delta as u128 * NICE_0_LOAD as u128, weight) as i64
    }
}

impl Node {
    #[inline]
    pub(crate) fn eevdf(&self) -> bool {
        self.tun.scheduler == crate::spec::SchedulerKind::Eevdf
    }

    #[inline]
    pub(crate) fn root_rq(&self, cpu: CpuId) -> RqId {
        ROOT * self.ncpus() + cpu
    }

    #[inline]
    pub(crate) fn parent_se(&self, se: SeId) -> Option<SeId> {
        self.rqs[self.ses[se].parent_rq].gse
    }

    #[inline]
    fn se_depth(&self, se: SeId) -> u32 {
        self.cgroups[self.rqs[self.ses[se].parent_rq].cg].depth
    }

    /// `se_is_idle`: a SCHED_IDLE task, or the entity of a cpu.idle group.
    #[inline]
    pub(crate) fn se_is_idle(&self, se: SeId) -> bool {
        match self.ses[se].kind {
            SeKind::Task(t) => self.tasks[t].idle_policy,
            SeKind::Group(rq) => self.cgroups[self.rqs[rq].cg].idle,
        }
    }

    /// Bring the running task's accounting up to `now` (the kernel's `update_curr`): work
    /// done at the CPU's current speed, sum_exec and vruntime of its entity and every group
    /// entity above it, the bandwidth silos (pulling from the pool when one runs dry), usage.
    pub(crate) fn update_curr(&mut self, cpu: CpuId) {
        self.account_curr(cpu, true);
    }

    /// The same accounting for an observer (samples, reads): it changes nothing the
    /// scheduler would decide on — no runtime is pulled from a bandwidth pool, min_vruntime
    /// does not move (the next `update_curr` does both, even at the same instant) — and, because
    /// vruntime and progress keep their division remainders, splitting an interval into more
    /// updates gives bit-identical results. Sampling more often never changes a run.
    pub(crate) fn observe_curr(&mut self, cpu: CpuId) {
        self.account_curr(cpu, false);
    }

    fn account_curr(&mut self, cpu: CpuId, pull_runtime: bool) {
        let now = self.now;
        let c = &mut self.cpus[cpu];
        let Some(t) = c.curr else {
            c.clock = now;
            return;
        };
        if c.stalled {
            // stolen time: nobody's (steal.rs)
            c.clock = now;
            return;
        }
        let delta = now - c.clock;
        if delta == 0 {
            // An observer settled up to now: `update_curr` still does what it would have
            // done had nobody looked (min_vruntime, refilling a spent silo).
            if pull_runtime && std::mem::take(&mut c.observed) {
                self.settle_observed(t);
            }
            return;
        }
        c.clock = now;
        c.observed = !pull_runtime;
        let work = delta as u128 * c.speed as u128 + c.progress_rem as u128;
        c.progress_rem = (work & (SPEED_ONE as u128 - 1)) as u64;
        let progress = (work >> SPEED_SHIFT) as u64;
        let task = &mut self.tasks[t];
        task.remaining = task.remaining.saturating_sub(progress);
        let cg = task.cg;
        let mut se = task.se;
        loop {
            let s = &mut self.ses[se];
            s.sum_exec += delta;
            if s.weight == NICE_0_LOAD {
                s.vruntime += delta as i64;
            } else {
                let num = delta as u128 * NICE_0_LOAD as u128 + s.vrem as u128;
                let (q, r) = crate::arith::div_rem(num, s.weight);
                s.vruntime += q as i64;
                s.vrem = r;
            }
            let rq = s.parent_rq;
            if pull_runtime {
                // Only `update_curr` moves min_vruntime, as in the kernel (readers of
                // cpu.stat/cpuacct call no `update_min_vruntime`): the old queue's
                // min_vruntime that a wakeup migration re-bases on (`migrate_task_rq_fair`)
                // is the one its last update_curr left, whoever looked since.
                self.update_min_vruntime(rq);
                self.account_cfs_rq_runtime(rq, delta);
            } else if self.rqs[rq].runtime_enabled {
                self.rqs[rq].runtime_remaining -= delta as i64;
            }
            match self.rqs[rq].gse {
                Some(g) => se = g,
                None => break,
            }
        }
        if self.hw.contention.is_some() {
            let speed = self.cpus[cpu].speed;
            self.charge_hw(cpu, t, delta, speed);
        }
        self.cgroups[cg].stats.usage_ns += delta;
        self.cgroups[cg].usage_total_ns += delta;
        let ncg = self.cgroups.len();
        self.cpu_busy[cpu * ncg + cg] += delta;
    }

    /// The part of `update_curr` that `observe_curr` left out, on the queues of running task
    /// `t`: `update_min_vruntime` and `account_cfs_rq_runtime` (of the time already charged).
    fn settle_observed(&mut self, t: TaskId) {
        let mut rq = self.ses[self.tasks[t].se].parent_rq;
        loop {
            self.update_min_vruntime(rq);
            self.account_cfs_rq_runtime(rq, 0);
            match self.rqs[rq].gse {
                Some(g) => rq = self.ses[g].parent_rq,
                None => break,
            }
        }
    }

    /// min_vruntime only moves forward: max(old, min(curr, leftmost)).
    fn update_min_vruntime(&mut self, rq: RqId) {
        let r = &self.rqs[rq];
        let curr_v = r.curr.filter(|&s| self.ses[s].on_rq).map(|s| self.ses[s].vruntime);
        let left = r.leftmost().map(|(v, _)| v);
        let cand = match (curr_v, left) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return,
        };
        let r = &mut self.rqs[rq];
        if cand > r.min_vruntime {
            r.set_min_vruntime(cand);
        }
    }

    /// `calc_group_shares`: the group's (scaled) shares × this CPU's load / the group's load on
    /// all CPUs (unscaled), clamped to [MIN_SHARES, shares] (§A4). With `group_shares =
    /// "pelt"` as the kernel (pelt.rs): this CPU's load is max(load.weight, load_avg) and the
    /// group's the Σ of published load_avgs; "instant": instantaneous queue weights only.
    pub(crate) fn calc_group_shares(&self, grq: RqId) -> u64 {
        let r = &self.rqs[grq];
        let g = &self.cgroups[r.cg];
        let avg = if self.tun.pelt_shares { r.avg.load_avg } else { 0 };
        pelt::group_shares(
            g.effective_shares(),
            scale_load_down(r.load),
            avg,
            g.total_load,
            g.load_contrib[r.cpu],
        )
    }

    /// `update_load_avg(cfs_rq, se, UPDATE_TG)` with `group_shares = "pelt"`: bring the queue's
    /// PELT sum to now with the weight it had since the last update (so it runs before every
    /// change of `load`), and, if a period ended, `update_tg_load_avg`. The root's average is
    /// always kept (whatever `group_shares`): it is the balancer's `cpu_load` (lb_groups.rs);
    /// so is a top-level group's queue's, from which `update_tg_cfs_load` estimates what its
    /// entity keeps when tasks leave (`carry_load`).
    #[inline]
    pub(crate) fn update_load_avg(&mut self, rq: RqId) {
        let cg = self.rqs[rq].cg;
        if cg == ROOT {
            // its tasks' part; its group entities count at their current weight (cpu_load)
            let r = &mut self.rqs[rq];
            r.avg.update(self.now, r.load - r.group_load);
        } else if self.tun.pelt_shares {
            self.update_pelt(rq);
        } else if self.cgroups[cg].parent == Some(ROOT) {
            let r = &mut self.rqs[rq];
            r.avg.update(self.now, scale_load_down(r.load));
        }
    }

    fn update_pelt(&mut self, rq: RqId) {
        let r = &mut self.rqs[rq];
        if r.cg == ROOT {
            return;
        }
        if r.avg.update(self.now, scale_load_down(r.load)) {
            let g = &mut self.cgroups[r.cg];
            pelt::update_tg_load(
                self.now,
                r.avg.load_avg,
                &mut g.load_contrib[r.cpu],
                &mut g.total_load,
                &mut r.tg_load_written,
            );
        }
    }

    /// Publish a cfs_rq's (unscaled) load into its group's total ("instant" shares: exact at
    /// every change; with PELT shares `update_load_avg` publishes the averages).
    fn publish_load(&mut self, rq: RqId) {
        let (cg, cpu, load) = (self.rqs[rq].cg, self.rqs[rq].cpu, scale_load_down(self.rqs[rq].load));
        if cg == ROOT || self.tun.pelt_shares {
            return;
        }
        let g = &mut self.cgroups[cg];
        g.total_load = g.total_load - g.load_contrib[cpu] + load;
        g.load_contrib[cpu] = load;
    }

    /// `update_cfs_group` → `reweight_entity` for a queued group entity. CFS keeps vruntime.
    fn reweight_group(&mut self, se: SeId) {
        let SeKind::Group(grq) = self.ses[se].kind else { return };
        let new_w = self.calc_group_shares(grq);
        let old_w = self.ses[se].weight;
        if new_w == old_w {
            return;
        }
        if self.ses[se].on_rq {
            let rq = self.ses[se].parent_rq;
            self.update_load_avg(rq);
            if self.eevdf() {
                self.reweight_eevdf(rq, se, new_w);
            } else if self.rqs[rq].curr != Some(se) {
                // CFS keeps vruntime; the running sums still follow the weight.
                let v = self.ses[se].vruntime;
                self.rqs[rq].remove(v, se, scale_load_down(old_w));
                self.rqs[rq].insert(v, se, scale_load_down(new_w));
            }
            self.rqs[rq].load = self.rqs[rq].load - old_w + new_w;
            self.rqs[rq].group_load = self.rqs[rq].group_load - old_w + new_w;
            self.publish_load(rq);
        }
        self.ses[se].weight = new_w;
        self.ses[se].vrem = 0;
    }

    /// What an entity's PELT average accrues at while time passes: nothing off its queue; a
    /// task its weight; a group entity RUNNABLE_UNIT, unweighted (the kernel's se load_sum
    /// counts runnable time, and its load_avg is that times the entity's current weight).
    #[inline]
    pub(crate) fn avg_input(&self, se: SeId) -> u64 {
        let s = &self.ses[se];
        match (s.on_rq, s.kind) {
            (false, _) => 0,
            (true, SeKind::Task(_)) => s.weight,
            (true, SeKind::Group(_)) => pelt::RUNNABLE_UNIT,
        }
    }

    /// Whether the entity keeps PELT averages: a task, or a top-level group's entity (the
    /// only group entities `cpu_load` and `carry_load` read).
    #[inline]
    pub(crate) fn keeps_averages(&self, se: SeId) -> bool {
        let s = &self.ses[se];
        matches!(s.kind, SeKind::Task(_)) || self.rqs[s.parent_rq].cg == ROOT
    }

    /// `__update_load_avg_se`: the entity's average brought to now at `avg_input`. Runs before
    /// every change of `on_rq` (a delayed entity is still queued, as the kernel counts it).
    #[inline]
    fn update_se_avg(&mut self, se: SeId) {
        if !self.keeps_averages(se) {
            return;
        }
        let load = self.avg_input(se);
        self.ses[se].avg.update(self.now, load);
    }

    /// What an entity's running average accrues at: RUNNABLE_UNIT while it is its queue's
    /// curr, nothing otherwise.
    #[inline]
    pub(crate) fn util_input(&self, se: SeId) -> u64 {
        if self.rqs[self.ses[se].parent_rq].curr == Some(se) {
            pelt::RUNNABLE_UNIT
        } else {
            0
        }
    }

    /// A task's or top-level group entity's running average brought to now at `util_input`,
    /// before its queue's curr changes (`update_load_avg` in `set_next_entity` /
    /// `put_prev_entity`).
    #[inline]
    fn update_se_util(&mut self, se: SeId) {
        if !self.keeps_averages(se) {
            return;
        }
        let running = self.util_input(se);
        self.ses[se].util.update(self.now, running);
    }

    /// `reweight_entity` on a task's average: brought to now at the old weight, then
    /// `load_avg = se_weight × load_sum / divider` at the new one (the kernel's se load_sum
    /// counts runnable time unweighted; the model's is weighted, so it is rescaled).
    pub(crate) fn reweight_se_avg(&mut self, se: SeId, new_w: u64) {
        self.update_se_avg(se);
        let s = &mut self.ses[se];
        s.avg.reweight(s.weight, new_w);
    }

    fn account_enqueue(&mut self, rq: RqId, se: SeId) {
        self.update_load_avg(rq);
        self.update_se_avg(se);
        let w = self.ses[se].weight;
        let v = self.ses[se].vruntime;
        let group = matches!(self.ses[se].kind, SeKind::Group(_));
        let r = &mut self.rqs[rq];
        r.load += w;
        if group {
            r.group_load += w;
        }
        r.nr_running += 1;
        if r.curr != Some(se) {
            r.insert(v, se, scale_load_down(w));
        }
        self.ses[se].on_rq = true;
        self.publish_load(rq);
    }

    fn account_dequeue(&mut self, rq: RqId, se: SeId) {
        self.update_load_avg(rq);
        self.update_se_avg(se);
        self.clear_buddies(se);
        let w = self.ses[se].weight;
        let v = self.ses[se].vruntime;
        let group = matches!(self.ses[se].kind, SeKind::Group(_));
        let r = &mut self.rqs[rq];
        if r.curr != Some(se) {
            r.remove(v, se, scale_load_down(w));
        }
        r.load -= w;
        if group {
            r.group_load -= w;
        }
        r.nr_running -= 1;
        self.ses[se].on_rq = false;
        self.publish_load(rq);
    }

    /// `place_entity` (6.1): a waking entity gets max(vruntime, min_vruntime − thresh/2) with
    /// thresh = sched_latency (min_granularity for idle entities, GENTLE_FAIR_SLEEPERS halves
    /// it); a new one starts a virtual slice after min_vruntime (START_DEBIT).
    fn place_entity(&mut self, rq: RqId, se: SeId, initial: bool) {
        let mut v = self.rqs[rq].min_vruntime;
        if initial {
            let slice = self.sched_slice(se);
            v += calc_delta_fair(slice, self.ses[se].weight);
        } else {
            let thresh = if self.se_is_idle(se) {
                self.tun.min_granularity
            } else {
                self.tun.sched_latency
            };
            v -= (thresh / 2) as i64;
        }
        let s = &mut self.ses[se];
        s.vruntime = s.vruntime.max(v);
    }

    /// Queue entity `se` (a task's, or a group's being unthrottled) and walk up the hierarchy:
    /// enqueue each group entity that was not queued, re-weigh the ones that were, and count
    /// `nr` tasks (`idle_nr` of them idle) into h_nr_running up to the first throttled queue
    /// (`enqueue_task_fair`).
    fn enqueue_chain(&mut self, mut se: SeId, nr: u32, mut idle_nr: u32, mode: Enqueue) {
        // enqueue_entity starts with update_curr: placement sees an up-to-date min_vruntime.
        let cpu = self.rqs[self.ses[se].parent_rq].cpu;
        self.update_curr(cpu);
        let mut adding = true;
        let mut first = true;
        loop {
            let rq = self.ses[se].parent_rq;
            // enqueue_entity / the levels above: update_load_avg before update_cfs_group.
            self.update_load_avg(rq);
            if adding && self.ses[se].on_rq {
                adding = false;
                if self.ses[se].delayed {
                    self.requeue_delayed_unseen(se); // a delayed group gets a task again
                }
            }
            if adding {
                if let SeKind::Group(grq) = self.ses[se].kind {
                    let w = self.calc_group_shares(grq);
                    if self.eevdf() {
                        self.reweight_eevdf(rq, se, w); // off the queue: rescales the saved lag
                                                        // 6.12+: the group entity's slice is its queue's shortest (slice.rs)
                        if self.tun.feat.custom_slices && !first {
                            self.take_child_slice(se, true);
                        }
                    }
                    self.ses[se].weight = w;
                }
                self.rqs[rq].curr_seen_at = self.now; // enqueue_entity: update_curr first
                match (self.eevdf(), first, mode) {
                    (true, first, mode) => self.place_eevdf(rq, se, first && mode == Enqueue::New),
                    (false, true, Enqueue::New) => self.place_entity(rq, se, true),
                    (false, true, Enqueue::Migrate) => self.ses[se].vruntime += self.rqs[rq].min_vruntime,
                    _ => self.place_entity(rq, se, false),
                }
                self.account_enqueue(rq, se);
                self.check_enqueue_throttle(rq);
            } else {
                self.reweight_group(se);
                if self.eevdf() && self.tun.feat.custom_slices && !first {
                    self.take_child_slice(se, false);
                }
            }
            first = false;
            let r = &mut self.rqs[rq];
            r.account_nr(self.now);
            r.h_nr_running += nr;
            r.idle_h_nr_running += idle_nr;
            let (cg, throttled) = (r.cg, r.throttled.any());
            if throttled {
                break;
            }
            if self.cgroups[cg].idle {
                idle_nr = nr;
            }
            match self.rqs[rq].gse {
                Some(g) => se = g,
                None => break,
            }
        }
        self.refresh_idle(cpu);
    }

    /// The mirror of `enqueue_chain` (`dequeue_entities`): a parent entity leaves its queue
    /// only when its own queue became empty. With `Dequeue::Migrate`, CFS stores the first
    /// entity's vruntime relative to its queue's min_vruntime so that it can be re-based on
    /// another CPU. EEVDF (6.12+) may instead leave a sleeping entity queued (DELAY_DEQUEUE:
    /// only the runnable counts drop), and a task's sleep that leaves company in its group
    /// makes the group entity the next buddy.
    fn dequeue_chain(&mut self, mut se: SeId, nr: u32, mut idle_nr: u32, how: Dequeue) {
        let cpu = self.rqs[self.ses[se].parent_rq].cpu;
        self.update_curr(cpu);
        let task_sleep =
            matches!(self.ses[se].kind, SeKind::Task(_)) && matches!(how, Dequeue::Sleep | Dequeue::Delayed);
        let mut removing = true;
        let mut delayed = false;
        let mut task_delayed = false;
        let mut first = true;
        loop {
            let rq = self.ses[se].parent_rq;
            self.update_load_avg(rq);
            if removing {
                // dequeue_entity starts with update_curr (eevdf.rs `unseen_curr_v`)
                self.rqs[rq].curr_seen_at = self.now;
                // Entities above the first leave because their queue emptied: a sleep.
                let sleep = !first || how != Dequeue::Migrate;
                let may_delay = !(first && how == Dequeue::Delayed) && how != Dequeue::Special;
                if sleep && may_delay && self.delays_dequeue(rq, se) {
                    // `set_delayed`: stays queued (load, V) but is no longer runnable.
                    self.clear_buddies(se);
                    self.ses[se].delayed = true;
                    removing = false;
                    delayed = true;
                    task_delayed = first;
                    if !first && self.tun.feat.custom_slices {
                        // dequeue_entities: a delayed group entity takes the shortest slice of
                        // the queue it stays on (`slice = cfs_rq_min_slice(cfs_rq)`, then the
                        // walk up starts at it); a delayed task returns before that walk.
                        self.ses[se].slice = self.min_slice(rq, true);
                    }
                } else {
                    if self.eevdf() {
                        self.save_lag(rq, se);
                        if self.ses[se].delayed {
                            // picked (DEQUEUE_DELAYED), or a delayed group's queue throttled
                            self.finish_delayed_lag(se);
                        }
                        if !sleep && self.tun.feat.place_rel_deadline {
                            let s = &mut self.ses[se];
                            s.deadline -= s.vruntime;
                            s.rel_deadline = true;
                        }
                    }
                    self.account_dequeue(rq, se);
                    if first && how == Dequeue::Migrate && !self.eevdf() {
                        self.ses[se].vruntime -= self.rqs[rq].min_vruntime;
                    }
                    self.update_min_vruntime(rq);
                    self.return_cfs_rq_runtime(rq);
                }
            } else {
                if !delayed {
                    // A delayed dequeue returns before `update_cfs_group` runs above it.
                    self.reweight_group(se);
                }
                // The slice walk up runs unless a task's own dequeue was delayed (-1).
                if self.eevdf() && self.tun.feat.custom_slices && !task_delayed {
                    self.take_child_slice(se, false);
                }
            }
            first = false;
            let r = &mut self.rqs[rq];
            r.account_nr(self.now);
            r.h_nr_running -= nr;
            r.idle_h_nr_running -= idle_nr;
            if r.throttled.any() {
                break;
            }
            if self.cgroups[r.cg].idle {
                idle_nr = nr;
            }
            if removing && self.rqs[rq].nr_running > 0 {
                removing = false;
                if let Some(g) = self.rqs[rq].gse {
                    if self.eevdf() && task_sleep && !self.throttled_hierarchy(rq) {
                        self.set_next_buddy(g);
                    }
                }
            }
            match self.rqs[rq].gse {
                Some(g) => se = g,
                None => break,
            }
        }
        self.refresh_idle(cpu);
    }

    /// `pick_next_entity` picked a delayed entity: it leaves now (`dequeue_entities` with
    /// DEQUEUE_DELAYED); its runnable counts left when it was delayed.
    pub(crate) fn finish_delayed(&mut self, se: SeId) {
        self.dequeue_chain(se, 0, 0, Dequeue::Delayed);
    }

    /// Put task `t` on `cpu`'s queues.
    pub(crate) fn enqueue_task(&mut self, t: TaskId, cpu: CpuId, mode: Enqueue) {
        let ncpus = self.ncpus();
        let task = &mut self.tasks[t];
        // Fork placement is `__set_task_cpu` (not counted); every later change of CPU is
        // `set_task_cpu`, which counts se.nr_migrations.
        if mode != Enqueue::New && task.cpu != cpu {
            self.cgroups[task.cg].stats.nr_migrations += 1;
        }
        task.cpu = cpu;
        let (se, cg) = (task.se, task.cg);
        let idle = task.idle_policy as u32;
        if mode == Enqueue::New {
            // init_entity_runnable_average: a new task starts at its full weight, and
            // attach_entity_cfs_rq propagates it (a full runnable sum) up its group entities
            self.ses[se].avg = pelt::Avg::runnable_from(self.now, self.ses[se].weight);
            if cg == ROOT {
                let r = self.root_rq(cpu);
                self.update_load_avg(r);
                self.rqs[r].avg.attach(self.ses[se].weight);
            } else {
                self.carry_queue_load(cg, cpu, None, scale_load_down(self.ses[se].weight));
                self.attach_group_runnable(cg, cpu, pelt::RUNNABLE_UNIT);
            }
        }
        self.ses[se].parent_rq = cg * ncpus + cpu;
        self.enqueue_chain(se, 1, idle, mode);
        self.add_runnable(t, cpu);
    }

    /// A task became runnable on `cpu` (enqueued, or a delayed one woken in place): pressure
    /// accounting and the CPU's list of runnable tasks.
    fn add_runnable(&mut self, t: TaskId, cpu: CpuId) {
        self.psi_runnable(t, cpu, 1);
        let c = &mut self.cpus[cpu];
        self.tasks[t].pos = c.tasks.len();
        c.tasks.push(t);
        self.note_nr(cpu);
    }

    /// Take task `t` off its CPU's queues (it sleeps, or `!sleep`: it is being migrated).
    pub(crate) fn dequeue_task(&mut self, t: TaskId, sleep: bool) {
        let task = &self.tasks[t];
        let (cpu, se, idle) = (task.cpu, task.se, task.idle_policy as u32);
        self.dequeue_chain(se, 1, idle, if sleep { Dequeue::Sleep } else { Dequeue::Migrate });
        self.psi_runnable(t, cpu, -1);
        let c = &mut self.cpus[cpu];
        let pos = self.tasks[t].pos;
        c.tasks.swap_remove(pos);
        if pos < c.tasks.len() {
            let moved = c.tasks[pos];
            self.tasks[moved].pos = pos;
        }
        self.tasks[t].pos = usize::MAX;
        if idle == 0 {
            self.non_idle_left(cpu);
        }
        self.note_nr(cpu);
    }

    /// Non-idle work is runnable here: some task that is neither SCHED_IDLE nor under an idle
    /// group, and not throttled (`!sched_idle_cpu` on a busy CPU). openEuler throttles offline
    /// groups exactly while this holds.
    #[inline]
    pub(crate) fn has_online_runnable(&self, cpu: CpuId) -> bool {
        let r = &self.rqs[self.root_rq(cpu)];
        r.h_nr_running > r.idle_h_nr_running
    }

    /// Non-idle work left this CPU's runnable set (it slept, moved or was throttled).
    pub(crate) fn non_idle_left(&mut self, cpu: CpuId) {
        if self.has_online_runnable(cpu) {
            return;
        }
        self.unthrottle_qos(cpu);
        // The CPU became "SCHED_IDLE only": balance at the next tick.
        if self.rqs[self.root_rq(cpu)].h_nr_running > 0 {
            self.balance_at_next_tick(cpu);
        }
    }

    /// Take a group's queue off its parent for `why` (`throttle_cfs_rq`); a queue already
    /// throttled for another reason only gains the reason.
    pub(crate) fn throttle(&mut self, grq: RqId, why: Throttle) {
        let r = &self.rqs[grq];
        if !r.throttled.any() {
            let gse = r.gse.expect("the root queue is never throttled");
            let nr = r.h_nr_running;
            let idle = if self.cgroups[r.cg].idle {
                nr
            } else {
                r.idle_h_nr_running
            };
            if self.ses[gse].on_rq {
                self.dequeue_chain(gse, nr, idle, Dequeue::Special);
            }
        }
        let r = &mut self.rqs[grq];
        r.throttled = r.throttled.with(why);
    }

    /// Drop one throttling reason; the queue goes back on its parent when none is left.
    pub(crate) fn unthrottle(&mut self, grq: RqId, why: Throttle) {
        let r = &mut self.rqs[grq];
        if !r.throttled.has(why) {
            return;
        }
        r.throttled = r.throttled.without(why);
        if r.throttled.any() || r.nr_running == 0 {
            return;
        }
        let gse = r.gse.unwrap();
        let nr = r.h_nr_running;
        let idle = if self.cgroups[r.cg].idle {
            nr
        } else {
            r.idle_h_nr_running
        };
        self.enqueue_chain(gse, nr, idle, Enqueue::Wakeup);
    }

    /// qos_level = -1 absolute preemption: take an offline group off this CPU while online
    /// work is runnable here (openEuler's per-CPU qos_throttled_cfs_rq list, §A7).
    fn throttle_qos(&mut self, grq: RqId) {
        let cpu = self.rqs[grq].cpu;
        self.throttle(grq, Throttle::QOS);
        self.cpus[cpu].qos_throttled.push(grq);
    }

    /// Give throttled offline groups back their place once no online task is runnable.
    pub(crate) fn unthrottle_qos(&mut self, cpu: CpuId) {
        let list = std::mem::take(&mut self.cpus[cpu].qos_throttled);
        for grq in list {
            self.unthrottle(grq, Throttle::QOS);
        }
    }

    /// Whether `t` sits under a throttled queue (and so cannot run or be migrated).
    pub(crate) fn task_throttled(&self, t: TaskId) -> bool {
        self.throttled_hierarchy(self.ses[self.tasks[t].se].parent_rq)
    }

    /// `put_prev_task_fair`: the running task's entities go back on their timelines.
    pub(crate) fn put_prev(&mut self, cpu: CpuId) {
        if let Some(t) = self.cpus[cpu].curr {
            self.put_prev_entities(t, &[]);
        }
    }

    /// `put_prev_entity` for each of task `t`'s entities that is still its queue's curr,
    /// except those in `keep` (picked again: `pick_next_task_fair` changes only the levels
    /// whose entity changes).
    fn put_prev_entities(&mut self, t: TaskId, keep: &[SeId]) {
        let mut se = self.tasks[t].se;
        loop {
            let rq = self.ses[se].parent_rq;
            if self.rqs[rq].curr == Some(se) && !keep.contains(&se) {
                self.update_se_util(se);
                self.rqs[rq].curr = None;
                if self.ses[se].on_rq {
                    let (v, w) = (self.ses[se].vruntime, scale_load_down(self.ses[se].weight));
                    self.rqs[rq].insert(v, se, w);
                }
            }
            match self.rqs[rq].gse {
                Some(g) => se = g,
                None => break,
            }
        }
    }

    /// `pick_next_task_fair`: from the root, take the leftmost entity at each level. An offline
    /// group met while online work is runnable here is throttled and the pick restarts.
    /// EEVDF picks as `pick_task_fair` does, before `prev` is put back: its entities are still
    /// their queues' curr ("Might not have done put_prev_entity()"), so what the pick does to
    /// them — a delayed entity leaving, the reweight that follows — meets them running; the
    /// levels whose entity is picked again stay set (no `set_next_entity`: their slice
    /// protection stays), the others are put back (`put_prev_entity`).
    fn pick_next(&mut self, cpu: CpuId, prev: Option<TaskId>) -> Option<TaskId> {
        let mut path = [0usize; MAX_DEPTH];
        'restart: loop {
            let mut rq = self.root_rq(cpu);
            let mut n = 0;
            loop {
                let se = if self.eevdf() {
                    self.pick_next_entity(rq)?
                } else {
                    self.rqs[rq].leftmost()?.1
                };
                if self.ses[se].delayed {
                    // `pick_next_entity`: a delayed entity that is picked leaves at last.
                    self.finish_delayed(se);
                    continue 'restart;
                }
                path[n] = se;
                n += 1;
                match self.ses[se].kind {
                    SeKind::Task(t) => {
                        if let Some(p) = prev.filter(|_| self.eevdf()) {
                            self.put_prev_entities(p, &path[..n]);
                        }
                        for &s in &path[..n] {
                            let prq = self.ses[s].parent_rq;
                            if self.rqs[prq].curr == Some(s) {
                                continue; // picked again (EEVDF only: CFS put prev back)
                            }
                            let (v, w) = (self.ses[s].vruntime, scale_load_down(self.ses[s].weight));
                            self.rqs[prq].remove(v, s, w);
                            self.update_se_util(s);
                            self.rqs[prq].curr = Some(s);
                            if self.rqs[prq].next == Some(s) {
                                self.rqs[prq].next = None; // set_next_entity → clear_buddies
                            }
                            self.ses[s].prev_sum_exec = self.ses[s].sum_exec;
                            if self.eevdf() {
                                self.set_protect_slice(s);
                            }
                        }
                        return Some(t);
                    }
                    SeKind::Group(grq) => {
                        let cg = self.rqs[grq].cg;
                        let top_offline = self.cgroups[cg].qos_level < 0
                            && !self.cgroups[cg]
                                .parent
                                .map(|p| self.cgroups[p].offline)
                                .unwrap_or(false);
                        if top_offline && self.has_online_runnable(cpu) {
                            self.throttle_qos(grq);
                            continue 'restart;
                        }
                        if top_offline && self.tun.smt_expeller && self.sibling_runs_online(cpu) {
                            self.throttle(grq, Throttle::EXPELLED);
                            self.cpus[cpu].expelled.push(grq);
                            continue 'restart;
                        }
                        rq = grq;
                    }
                }
            }
        }
    }

    /// `__schedule`: settle, put the running task back, pick the next (pulling work first if
    /// this CPU would go idle), account the switch and the wait.
    pub(crate) fn schedule(&mut self, cpu: CpuId) {
        if self.cpus[cpu].stalled {
            // the hypervisor has the CPU (steal.rs): it schedules when it is back
            self.defer_schedule_to_stall_end(cpu);
            return;
        }
        if self.cpus[cpu].curr.is_none() && self.idle_exit_pending(cpu) {
            return; // the CPU is leaving its idle state (cpuidle.rs): it picks then
        }
        self.update_curr(cpu);
        let prev = self.cpus[cpu].curr;
        // prev is still runnable (preempted) rather than asleep: how its segment ends
        let mut prev_runnable = false;
        if let Some(p) = prev {
            if !self.eevdf() {
                self.put_prev(cpu);
            }
            self.check_cfs_rq_runtime_path(p);
            self.tasks[p].exec_start = self.now;
            if self.tasks[p].state == TaskState::Running {
                self.tasks[p].state = TaskState::Runnable;
                self.tasks[p].wait_start = self.now;
                prev_runnable = true;
            }
        }
        self.cpus[cpu].curr = None;
        self.refresh_idle(cpu);
        let mut next = self.pick_next(cpu, prev);
        if let (None, Some(p)) = (next, prev) {
            self.put_prev_entities(p, &[]); // going idle (or pulling first): all of prev goes back
        }
        if next.is_none() && self.newidle_balance(cpu) {
            next = self.pick_next(cpu, prev);
        }
        if let Some(n) = next {
            let node_here = self.topo.numa_of[cpu];
            let task = &mut self.tasks[n];
            if task.state == TaskState::Runnable {
                let waited = self.now - task.wait_start;
                let stats = &mut self.cgroups[task.cg].stats;
                stats.wait_ns += waited;
                let k = crate::stats::runqlat_bucket(waited);
                if std::mem::take(&mut task.woken) {
                    stats.runqlat[k] += 1;
                } else if Some(n) != prev {
                    stats.preempted_wait[k] += 1;
                }
            }
            task.state = TaskState::Running;
            task.last_ran = self.now;
            if Some(n) != prev {
                task.switched_in = self.now;
            }
            if task.home_node.is_none() {
                // First touch: memory lands on this node if cpuset.mems allows, else on the
                // first node it allows.
                let mems = &self.cgroups[task.cg].mems;
                task.home_node = Some(if mems[node_here] {
                    node_here
                } else {
                    mems.iter().position(|&m| m).unwrap_or(0)
                });
            }
        }
        if let Some(p) = prev {
            if next != Some(p) {
                self.switched_out(p, prev_runnable);
            }
        }
        self.cpus[cpu].curr = next;
        self.refresh_idle(cpu);
        self.cpus[cpu].clock = self.now;
        self.cpus[cpu].observed = false;
        if prev != next {
            self.cpus[cpu].progress_rem = 0;
            if self.hw.contention.is_some() {
                self.llc_changed(cpu, prev, next);
            }
        }
        self.cpus[cpu].speed = self.speed_of(cpu);
        if prev != next {
            self.psi_switch(cpu, prev, next);
            if let Some(tr) = self.run_trace.as_mut() {
                tr.push((self.now, cpu, next));
            }
        }
        if prev.is_some() != next.is_some() {
            if next.is_some() {
                self.nr_idle_cpus -= 1;
            } else {
                self.nr_idle_cpus += 1;
            }
            self.busy_changed(cpu);
            self.steal_busy_changed(cpu, next.is_some());
        }
        if self.tun.smt_expeller {
            let online = |t: Option<TaskId>| t.is_some_and(|t| !self.cgroups[self.tasks[t].cg].offline);
            match (online(prev), online(next)) {
                (false, true) => self.expel_siblings(cpu),
                (true, false) => self.release_siblings(cpu),
                _ => {}
            }
        }
        self.enter_idle_state(cpu, next.is_some());
        self.reprogram(cpu);
        if next.is_some() {
            self.arm_balance(cpu);
        }
    }

    /// Some SMT sibling of `cpu` is running online (not qos_level = -1) work.
    fn sibling_runs_online(&self, cpu: CpuId) -> bool {
        self.topo.siblings(cpu).iter().any(|&s| {
            s != cpu
                && self.cpus[s]
                    .curr
                    .is_some_and(|t| !self.cgroups[self.tasks[t].cg].offline)
        })
    }

    /// SMT expeller: `cpu` started online work; siblings running offline tasks reschedule
    /// (the IPI), and their pick keeps offline groups off.
    fn expel_siblings(&mut self, cpu: CpuId) {
        for i in 0..self.topo.siblings(cpu).len() {
            let s = self.topo.siblings(cpu)[i];
            if s != cpu
                && self.cpus[s]
                    .curr
                    .is_some_and(|t| self.cgroups[self.tasks[t].cg].offline)
            {
                self.schedule(s);
            }
        }
    }

    /// SMT expeller: `cpu` stopped online work; siblings no longer next to online work get
    /// their offline groups back.
    fn release_siblings(&mut self, cpu: CpuId) {
        for i in 0..self.topo.siblings(cpu).len() {
            let s = self.topo.siblings(cpu)[i];
            if s == cpu || self.cpus[s].expelled.is_empty() || self.sibling_runs_online(s) {
                continue;
            }
            for grq in std::mem::take(&mut self.cpus[s].expelled) {
                self.unthrottle(grq, Throttle::EXPELLED);
            }
            self.queue_changed(s);
        }
    }

    /// A CPU's queues changed without a wakeup check (a group came back, a task was moved
    /// in): an idle CPU schedules, a busy one re-plans its running task's slice.
    pub(crate) fn queue_changed(&mut self, cpu: CpuId) {
        if self.cpus[cpu].curr.is_none() {
            self.schedule(cpu);
        } else {
            self.reprogram(cpu);
        }
    }

    /// A task's switch out (sched_switch with it as prev): counted, and its run segment
    /// binned by how it ended, still runnable (preempted) or asleep.
    fn switched_out(&mut self, t: TaskId, runnable: bool) {
        let task = &self.tasks[t];
        let k = crate::stats::runqlat_bucket(self.now - task.switched_in);
        let stats = &mut self.cgroups[task.cg].stats;
        stats.nr_switches += 1;
        if runnable {
            stats.run_preempted[k] += 1;
        } else {
            stats.run_blocked[k] += 1;
        }
    }

    /// Stop the running task of `cpu` and leave the CPU empty (it stays queued, waiting), so
    /// that the caller can move it; the caller schedules the CPU again afterwards.
    pub(crate) fn preempt_off_cpu(&mut self, cpu: CpuId) {
        let Some(t) = self.cpus[cpu].curr else { return };
        self.update_curr(cpu);
        self.put_prev(cpu);
        self.cpus[cpu].curr = None;
        self.refresh_idle(cpu);
        if self.hw.contention.is_some() {
            self.llc_changed(cpu, Some(t), None);
        }
        self.psi_switch(cpu, Some(t), None);
        if let Some(tr) = self.run_trace.as_mut() {
            tr.push((self.now, cpu, None));
        }
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].wait_start = self.now;
        self.switched_out(t, true);
        self.nr_idle_cpus += 1;
        self.busy_changed(cpu);
        self.steal_busy_changed(cpu, false);
        if self.tun.smt_expeller && !self.cgroups[self.tasks[t].cg].offline {
            self.release_siblings(cpu);
        }
    }

    /// A CPU started or stopped running: its SMT siblings change speed.
    fn busy_changed(&mut self, cpu: CpuId) {
        for i in 0..self.topo.siblings(cpu).len() {
            let s = self.topo.siblings(cpu)[i];
            if s != cpu {
                self.refresh_speed(s);
            }
        }
    }

    /// Settle `cpu` at its old speed, then take the new one.
    pub(crate) fn refresh_speed(&mut self, cpu: CpuId) {
        self.observe_curr(cpu);
        let speed = self.speed_of(cpu);
        if speed != self.cpus[cpu].speed {
            self.cpus[cpu].speed = speed;
            self.reprogram(cpu);
        }
    }

    /// Speed of the work running on `cpu`: `smt_speed` while an SMT sibling also runs (for a
    /// task with a contention profile: its LLC / memory / core-sharing speed, contention.rs),
    /// times `numa_remote_speed` when the task's memory is on another NUMA node.
    fn speed_of(&self, cpu: CpuId) -> u64 {
        let remote = self.cpus[cpu]
            .curr
            .is_some_and(|t| self.tasks[t].home_node.is_some_and(|h| h != self.topo.numa_of[cpu]));
        if let Some(s) = self.contention_speed(cpu) {
            return fixed_speed(s, remote.then_some(self.topo.numa_remote_speed));
        }
        let smt = self
            .topo
            .siblings(cpu)
            .iter()
            .any(|&s| s != cpu && self.cpus[s].curr.is_some());
        self.speeds[smt as usize * 2 + remote as usize]
    }

    /// The four speeds without a contention profile, by (an SMT sibling runs, memory is
    /// remote): `speed_of`'s products, computed once (the same float operations in the same
    /// order, so the same bits).
    pub(crate) fn speed_table(topo: &crate::topology::Topology) -> [u64; 4] {
        let remote = Some(topo.numa_remote_speed);
        [
            fixed_speed(1.0, None),
            fixed_speed(1.0, remote),
            fixed_speed(topo.smt_speed, None),
            fixed_speed(topo.smt_speed, remote),
        ]
    }

    /// `sched_slice` (6.1, ALT_PERIOD and BASE_SLICE on): the period for the CPU's runnable
    /// tasks, scaled by the entity's weight share at every level up to the root, floored at
    /// min_granularity (idle_min_granularity for an idle entity beside non-idle ones).
    fn sched_slice(&self, init: SeId) -> u64 {
        let on_rq = self.ses[init].on_rq;
        let rq0 = self.ses[init].parent_rq;
        let cpu = self.rqs[rq0].cpu;
        let nr = self.rqs[self.root_rq(cpu)].h_nr_running as u64 + (!on_rq) as u64;
        let mut slice = self.tun.period(nr);
        let mut se = init;
        loop {
            let s = &self.ses[se];
            let rq = &self.rqs[s.parent_rq];
            let load = rq.load + if s.on_rq { 0 } else { s.weight };
            if load > 0 {
                slice = crate::arith::div(slice as u128 * s.weight as u128, load) as u64;
            }
            match rq.gse {
                Some(g) => se = g,
                None => break,
            }
        }
        // Above both floors the floor does not matter: skip the idle tests.
        if slice >= self.tun.min_granularity.max(self.tun.idle_min_granularity) {
            return slice;
        }
        let r0 = &self.rqs[rq0];
        let sched_idle_rq = r0.h_nr_running > 0 && r0.idle_h_nr_running == r0.h_nr_running;
        let min_gran = if self.se_is_idle(init) && !sched_idle_rq {
            self.tun.idle_min_granularity
        } else {
            self.tun.min_granularity
        };
        slice.max(min_gran)
    }

    /// The running task's entity at each level whose queue has company, with its ideal slice.
    fn tick_levels(&self, cpu: CpuId, mut f: impl FnMut(SeId, u64, Option<i64>)) {
        let Some(t) = self.cpus[cpu].curr else { return };
        let mut se = self.tasks[t].se;
        loop {
            let rq = &self.rqs[self.ses[se].parent_rq];
            if rq.nr_running > 1 {
                let ideal = self.sched_slice(se).min(self.tun.sched_latency);
                f(se, ideal, rq.leftmost().map(|(v, _)| v));
            }
            match rq.gse {
                Some(g) => se = g,
                None => break,
            }
        }
    }

    /// The check due at `resched_at`: the scheduler tick's, or — between ticks, which only a
    /// task that reads its own CPU clock plans (slice.rs) — the `update_curr` that read runs
    /// on its own queue.
    pub(crate) fn slice_check(&mut self, cpu: CpuId) -> bool {
        if self.now.is_multiple_of(self.tun.tick_ns) || !self.eevdf() {
            return self.tick_wants_resched(cpu);
        }
        self.eevdf_renew_levels(cpu, 0, 1) // cpu_event has run update_curr
    }

    /// `check_preempt_tick` at every level (`entity_tick`): resched when the entity ran longer
    /// than its ideal slice, or ran at least min_granularity and is ahead of the leftmost by
    /// more than the ideal slice.
    pub(crate) fn tick_wants_resched(&mut self, cpu: CpuId) -> bool {
        let Some(t) = self.cpus[cpu].curr else { return false };
        // entity_tick at each level: update_load_avg(cfs_rq_of(se)), then update_cfs_group
        // re-weighs the group entities.
        let mut se = self.tasks[t].se;
        self.update_load_avg(self.ses[se].parent_rq);
        while let Some(g) = self.parent_se(se) {
            self.update_load_avg(self.ses[g].parent_rq);
            self.reweight_group(g);
            se = g;
        }
        if self.eevdf() {
            return self.eevdf_renew(cpu);
        }
        let min_gran = self.tun.min_granularity;
        let mut resched = false;
        self.tick_levels(cpu, |se, ideal, left| {
            let s = &self.ses[se];
            let delta_exec = s.sum_exec - s.prev_sum_exec;
            if delta_exec > ideal {
                resched = true;
            } else if delta_exec >= min_gran {
                if let Some(lv) = left {
                    if s.vruntime - lv > ideal as i64 {
                        resched = true;
                    }
                }
            }
        });
        resched
    }

    /// With PELT group shares, every tick of a CPU running a task inside a task group matters:
    /// `entity_tick` updates the load averages and re-weighs the group entities, and the
    /// shares move with the averages at every tick. Other CPUs' ticks change nothing the model
    /// keeps (the root's average, kept for the balancer, changes only with its weight and is
    /// brought to now when read), so only these are visited.
    #[inline]
    pub(crate) fn next_shares_tick(&self, cpu: CpuId) -> Ns {
        if !self.tun.pelt_shares {
            return Ns::MAX;
        }
        let in_group = self.cpus[cpu]
            .curr
            .is_some_and(|t| self.rqs[self.ses[self.tasks[t].se].parent_rq].gse.is_some());
        if !in_group {
            return Ns::MAX;
        }
        let tick = self.tun.tick_ns;
        (self.now / tick + 1) * tick
    }

    /// The first scheduler tick at which `tick_wants_resched` will hold if nothing else
    /// changes on this CPU (anything that does change it reprograms the CPU).
    pub(crate) fn next_resched_tick(&self, cpu: CpuId) -> Ns {
        if self.eevdf() {
            return self.eevdf_next_tick(cpu);
        }
        let min_gran = self.tun.min_granularity;
        let mut wait = u64::MAX;
        self.tick_levels(cpu, |se, ideal, left| {
            let s = &self.ses[se];
            let delta_exec = s.sum_exec - s.prev_sum_exec;
            let t_a = (ideal + 1).saturating_sub(delta_exec);
            let mut t = t_a;
            if let Some(lv) = left {
                let lead = s.vruntime - lv;
                let need_v = ideal as i64 + 1 - lead;
                let t_v = if need_v <= 0 {
                    0
                } else {
                    (need_v as u128 * s.weight as u128).div_ceil(NICE_0_LOAD as u128) as u64
                };
                t = t.min(t_v.max(min_gran.saturating_sub(delta_exec)));
            }
            wait = wait.min(t);
        });
        if wait == u64::MAX {
            return Ns::MAX;
        }
        let tick = self.tun.tick_ns;
        let at = self.now.saturating_add(wait).max(self.now + 1);
        at.div_ceil(tick).saturating_mul(tick)
    }

    /// `check_preempt_wakeup` (6.1): does waking task `p` preempt the running task?
    fn wakeup_preempts(&mut self, cpu: CpuId, p: TaskId) -> bool {
        let Some(c) = self.cpus[cpu].curr else { return true };
        if c == p {
            return false;
        }
        let (ct, pt) = (&self.tasks[c], &self.tasks[p]);
        // An idle-policy curr is preempted by any non-idle waker; idle wakers never preempt.
        if ct.idle_policy && !pt.idle_policy {
            return true;
        }
        // Batch and idle tasks never preempt; without WAKEUP_PREEMPTION (EEVDF's switch
        // here) nothing else does either: the tick decides.
        if pt.idle_policy || (self.eevdf() && !self.tun.feat.wakeup_preemption) {
            return false;
        }
        let (se, pse) = self.find_matching_se(ct.se, pt.se);
        let (cse_idle, pse_idle) = (self.se_is_idle(se), self.se_is_idle(pse));
        if cse_idle && !pse_idle {
            return true;
        }
        if cse_idle != pse_idle {
            return false;
        }
        if self.eevdf() {
            return self.eevdf_wakeup_preempts(se, pse);
        }
        // wakeup_preempt_entity: ahead by more than wakeup_granularity in the waker's virtual time.
        let vdiff = self.ses[se].vruntime - self.ses[pse].vruntime;
        if vdiff <= 0 {
            return false;
        }
        let gran = calc_delta_fair(self.tun.wakeup_granularity, self.ses[pse].weight);
        vdiff > gran
    }

    /// `find_matching_se`: walk both entities (of one CPU's hierarchy) up to the ancestors
    /// that share a queue.
    pub(crate) fn find_matching_se(&self, mut se: SeId, mut pse: SeId) -> (SeId, SeId) {
        while self.se_depth(se) > self.se_depth(pse) {
            se = self.parent_se(se).unwrap();
        }
        while self.se_depth(pse) > self.se_depth(se) {
            pse = self.parent_se(pse).unwrap();
        }
        while self.ses[se].parent_rq != self.ses[pse].parent_rq {
            se = self.parent_se(se).unwrap();
            pse = self.parent_se(pse).unwrap();
        }
        (se, pse)
    }

    /// After `t` was queued on `cpu`: run it if the CPU is idle, preempt if the rules say so,
    /// otherwise just re-plan the running task's slice (the queue changed).
    pub(crate) fn check_preempt_curr(&mut self, cpu: CpuId, t: TaskId) {
        if self.cpus[cpu].curr.is_none() {
            self.schedule(cpu);
            return;
        }
        if self.cpus[cpu].blocking {
            self.maybe_kick_idle(cpu);
            return;
        }
        self.update_curr(cpu);
        // EEVDF: the enqueue's update_curr renews a used-up slice; that alone reschedules
        // only if others besides the waker were already waiting (the waker is not yet
        // counted there), otherwise the eligibility/deadline pick decides.
        let renewed =
            self.eevdf() && self.eevdf_renew_for_wakeup(cpu, t) && self.rqs[self.root_rq(cpu)].h_nr_running > 2;
        if renewed || self.wakeup_preempts(cpu, t) {
            self.schedule(cpu);
        } else {
            self.reprogram(cpu);
        }
        self.maybe_kick_idle(cpu);
    }

    /// What waking `t` onto `cpu` costs: the message it receives (`cross_cpu`), the wakeup
    /// across CPUs (remote_wakeup.rs).
    fn charge_wakeup(&mut self, t: TaskId, cpu: CpuId) {
        if let Some(m) = self.crossing.take() {
            self.charge_crossing(m, cpu);
        }
        if self.remote_wakeup.is_some() {
            self.charge_remote_wakeup(t, cpu);
        }
    }

    /// `try_to_wake_up`: choose a CPU, re-base vruntime if it moved, enqueue, check preemption.
    pub(crate) fn try_to_wake_up(&mut self, t: TaskId) {
        debug_assert_eq!(self.tasks[t].state, TaskState::Sleeping);
        if self.task_delayed(t) {
            // `ttwu_runnable`: still queued (DELAY_DEQUEUE), so it wakes where it is.
            self.requeue_delayed_task(t);
            return;
        }
        let prev = self.tasks[t].cpu;
        let cpu = self.select_task_rq(t, prev);
        self.charge_wakeup(t, cpu);
        if cpu != prev && !self.eevdf() {
            // CFS re-bases vruntime on the new queue; EEVDF carries the lag instead.
            let ncpus = self.ncpus();
            let cg = self.tasks[t].cg;
            let se = self.tasks[t].se;
            self.ses[se].vruntime += self.rqs[cg * ncpus + cpu].min_vruntime - self.rqs[cg * ncpus + prev].min_vruntime;
        }
        if cpu != prev {
            // migrate_task_rq_fair → remove_entity_load_avg: the sleeper's blocked load leaves
            // prev's average; attach_entity_load_avg at enqueue brings it to the new CPU's
            self.carry_load(t, prev, cpu);
        }
        self.enqueue_task(t, cpu, Enqueue::Wakeup);
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].wait_start = self.now;
        self.tasks[t].woken = true;
        self.check_preempt_curr(cpu, t);
    }

    /// Wake a delayed task in place (`enqueue_task_fair` with ENQUEUE_DELAYED): it is
    /// requeued (`requeue_delayed_entity`) and counts as runnable again up its hierarchy.
    fn requeue_delayed_task(&mut self, t: TaskId) {
        let (cpu, se) = (self.tasks[t].cpu, self.tasks[t].se);
        self.update_curr(cpu);
        self.charge_wakeup(t, cpu);
        self.requeue_delayed_unseen(se);
        let mut idle_nr = self.tasks[t].idle_policy as u32;
        let mut rq = self.ses[se].parent_rq;
        loop {
            let r = &mut self.rqs[rq];
            r.account_nr(self.now);
            r.h_nr_running += 1;
            r.idle_h_nr_running += idle_nr;
            if r.throttled.any() {
                break;
            }
            if self.cgroups[r.cg].idle {
                idle_nr = 1;
            }
            match self.rqs[rq].gse {
                Some(g) => rq = self.ses[g].parent_rq,
                None => break,
            }
        }
        self.refresh_idle(cpu);
        self.add_runnable(t, cpu);
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].wait_start = self.now;
        self.tasks[t].woken = true;
        self.check_preempt_curr(cpu, t);
    }

    /// `wake_up_new_task`: fork placement on the idlest CPU, START_DEBIT.
    pub(crate) fn wake_up_new(&mut self, t: TaskId) {
        let cpu = self.select_fork_cpu(t);
        self.enqueue_task(t, cpu, Enqueue::New);
        self.tasks[t].state = TaskState::Runnable;
        self.tasks[t].wait_start = self.now;
        self.tasks[t].woken = true;
        self.check_preempt_curr(cpu, t);
    }

    /// Move a queued, not running task to `dst` (`detach_task` + `attach_task`) without
    /// deciding about preemption on `dst` (newly-idle balancing picks right after).
    pub(crate) fn move_task(&mut self, t: TaskId, dst: CpuId) {
        debug_assert_eq!(self.tasks[t].state, TaskState::Runnable);
        let src = self.tasks[t].cpu;
        self.update_curr(src);
        // detach_entity_load_avg / attach_entity_load_avg: the task's load leaves src's
        // average and joins dst's at once (lb_groups.rs `cpu_load`)
        self.carry_load(t, src, dst);
        self.dequeue_task(t, false);
        self.enqueue_task(t, dst, Enqueue::Migrate);
        if self.cpus[src].curr.is_some() {
            self.reprogram(src);
        }
    }

    /// A task changes CPU: what it weighs on `src`'s root average leaves it and joins
    /// `dst`'s (`remove_entity_load_avg` / `attach_entity_load_avg`), brought to now first so
    /// that the sum joins `dst`'s current period. A root task's own average moves (its PELT
    /// load through its hierarchy there, `task_h_load_on`). A grouped task's moves through its
    /// top-level group's entities (`add_tg_cfs_propagate` → `update_tg_cfs_load`, fair.c): on
    /// `dst` the entity's runnable sum grows by the task's (at most to always runnable); on
    /// `src` the task's load leaves the group's queue, and the entity keeps what that queue's
    /// average says the tasks still there were runnable, "assuming all tasks are equally
    /// runnable" (the queue's load_sum over its weight now; nothing if none is queued), never
    /// more than it had nor less than the time it ran.
    fn carry_load(&mut self, t: TaskId, src: CpuId, dst: CpuId) {
        let cg = self.tasks[t].cg;
        if cg == ROOT {
            let (rs, rd) = (self.root_rq(src), self.root_rq(dst));
            self.update_load_avg(rs);
            self.update_load_avg(rd);
            let h_load = self.task_h_load_on(t, src) as u64;
            let moved = self.rqs[rs].avg.detach(h_load);
            self.rqs[rd].avg.attach(moved);
            return;
        }
        let top = self.top_group(cg);
        let (qs, qd) = (top * self.ncpus() + src, top * self.ncpus() + dst);
        let (Some(gs), Some(gd)) = (self.rqs[qs].gse, self.rqs[qd].gse) else {
            return;
        };
        let se = self.tasks[t].se;
        let load = self.task_load_avg(t);
        let runnable = (load as u128 * pelt::RUNNABLE_UNIT as u128 / self.ses[se].weight.max(1) as u128) as u64;
        self.update_se_util(se);
        let util = self.ses[se].util.load_avg;
        self.update_se_avg(gs);
        self.update_se_util(gs);
        self.update_se_util(gd);
        // detach_entity_load_avg: the task's load and running time leave the group's queue
        // (`update_tg_cfs_util` then gives the entity the queue's running average)
        self.carry_queue_load(cg, src, Some(dst), scale_load_down(load));
        self.ses[gs].util.detach(util);
        let queued = self.tasks[t].state == TaskState::Runnable && cg == top;
        let weight = scale_load_down(self.rqs[qs].load - if queued { self.ses[se].weight } else { 0 });
        let equally = self.rqs[qs].avg.load_sum.checked_div(weight).unwrap_or(0);
        let g = &mut self.ses[gs];
        let keep = g
            .avg
            .load_sum
            .min(equally.saturating_mul(pelt::RUNNABLE_UNIT))
            .max(g.util.load_sum);
        if keep < g.avg.load_sum {
            g.avg.set_sum(keep);
        }
        // attach_entity_load_avg on dst: its running time and runnable sum join
        self.ses[gd].util.attach_at_most(util, pelt::RUNNABLE_UNIT);
        self.attach_group_runnable(cg, dst, runnable);
    }

    /// `detach_entity_load_avg` / `attach_entity_load_avg` on the group queues that keep an
    /// average (`update_load_avg`): a task of `load` (scaled down) leaves `cg`'s queue on
    /// `src` and, unless it is new (`None`: a fork joins `src`), joins it on `dst`. For a task
    /// in a nested group its top-level group's queue moves as much (the kernel's moves by what
    /// the nested group's entity propagates up: about that).
    fn carry_queue_load(&mut self, cg: CgId, src: CpuId, dst: Option<CpuId>, load: u64) {
        let ncpus = self.ncpus();
        let top = self.top_group(cg);
        for g in [Some(cg), (top != cg).then_some(top)].into_iter().flatten() {
            if g == ROOT || !(self.tun.pelt_shares || g == top) {
                continue;
            }
            let qs = g * ncpus + src;
            self.update_load_avg(qs);
            match dst {
                Some(d) => {
                    self.rqs[qs].avg.detach(load);
                    let qd = g * ncpus + d;
                    self.update_load_avg(qd);
                    self.rqs[qd].avg.attach(load);
                }
                None => self.rqs[qs].avg.attach(load),
            }
        }
    }

    /// The top-level group (a child of the root) that `cg` is in.
    pub(crate) fn top_group(&self, cg: CgId) -> CgId {
        let mut top = cg;
        while let Some(p) = self.cgroups[top].parent.filter(|&p| p != ROOT) {
            top = p;
        }
        top
    }

    /// `add_tg_cfs_propagate` of a positive runnable sum up from `cg`'s queue on `cpu`: its
    /// top-level group's entity there gains `runnable` (× RUNNABLE_UNIT of the time), at most
    /// to always runnable (`min(runnable_sum + se->avg.load_sum, divider)`).
    fn attach_group_runnable(&mut self, cg: CgId, cpu: CpuId, runnable: u64) {
        if cg == ROOT {
            return;
        }
        let q = self.top_group(cg) * self.ncpus() + cpu;
        let Some(g) = self.rqs[q].gse else { return };
        self.update_se_avg(g);
        self.ses[g].avg.attach_at_most(runnable, pelt::RUNNABLE_UNIT);
    }

    /// Balancing moved `t` to a CPU that may be running something: the waker rules apply
    /// (`attach_task` → `check_preempt_curr`).
    pub(crate) fn migrate_task(&mut self, t: TaskId, dst: CpuId) {
        self.move_task(t, dst);
        self.check_preempt_curr(dst, t);
    }
}

/// A speed factor (times the remote-memory factor, if any) in fixed point, rounded.
fn fixed_speed(base: f64, remote: Option<f64>) -> u64 {
    let mut speed = 1.0f64;
    speed *= base;
    if let Some(r) = remote {
        speed *= r;
    }
    (speed * SPEED_ONE as f64).round() as u64
}

#[cfg(test)]
mod tests {
    //! Hand-worked cases of the fair class's arithmetic (kernel-and-anchors.md §A3, §A4).
    use super::*;
    use serde_json::json;

    /// A node of `ncpus` CPUs whose hogs have been forked (t = 0 processed).
    fn forked(ncpus: u32, cgroups: serde_json::Value, workloads: serde_json::Value) -> Node {
        let spec = json!({"topology": {"cores_per_socket": ncpus}, "cgroups": cgroups, "workloads": workloads});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(0).unwrap();
        n
    }

    fn task_of(n: &Node, wl: usize) -> TaskId {
        n.tasks.iter().position(|t| t.wl == wl).unwrap()
    }

    #[test]
    fn a_task_running_half_the_time_has_the_pelt_sum_of_its_run_periods() {
        // One CPU, one task alternately running 8 PELT periods (8 × 1024 × 1024 ns) and
        // sleeping 8 from t = 0 (a closed-loop client exists asleep from the start: its
        // average starts at 0). The sum of a run of 8 periods ending j periods ago is
        // Σ_{i=j}^{j+7} y^i, so after k cycles (each run then sleep), divided by LOAD_AVG_MAX ≈
        // 1/(1 − y), with y^32 = 1/2, its average is the geometric sum of the cycles:
        // w · y^8 (1 − y^8)/(1 − y^16) · (1 − y^(16k)) = w · 0.45684 · (1 − y^(16k)).
        // After 2 cycles (33.6 ms): 0.2284 w; after 6 (100.7 ms, half of it running):
        // 0.45684 · 7/8 = 0.3997 w — not w, which the instantaneous share of its CPU (it is
        // alone there, and queued when it runs) would say.
        const P: u64 = 1024 * 1024;
        let fresh = || {
            forked(
                1,
                json!([{"name": "a"}]),
                json!([{"kind": "closed_loop", "name": "d", "cgroup": "a", "clients": 1,
                "service": {"dist": "constant", "value_ns": 8 * P},
                "think": {"dist": "constant", "value_ns": 8 * P}}]),
            )
        };
        let y = libm::pow(0.5, 1.0 / 32.0);
        for k in [2u64, 6] {
            let mut n = fresh();
            n.run_until(16 * P * k).unwrap();
            let t = task_of(&n, 0);
            let w = n.ses[n.tasks[t].se].weight as f64;
            let yk = libm::pow(y, 16.0 * k as f64);
            let want = w * libm::pow(y, 8.0) * (1.0 - libm::pow(y, 8.0)) / (1.0 - libm::pow(y, 16.0)) * (1.0 - yk);
            let got = n.task_load_avg(t) as f64;
            assert!(
                (got - want).abs() < 0.01 * w,
                "k {k}: {got} want {want:.0} ({:.4} w)",
                want / w
            );
            // task_h_load of a task alone in its group: the group's ratio is 1
            assert_eq!(n.task_h_load(t), got);
        }
    }

    #[test]
    fn slice_two_tasks_one_cpu_is_half_the_latency() {
        // 1 CPU → factor 1: sched_latency 6 ms; 2 nice-0 tasks → 3 ms each.
        let n = forked(
            1,
            json!([{"name": "a"}]),
            json!([{"kind": "hog", "name": "h", "cgroup": "a", "threads": 2}]),
        );
        let t = task_of(&n, 0);
        assert_eq!(n.sched_slice(n.tasks[t].se), 3_000_000);
    }

    #[test]
    fn slice_beyond_nr_latency_stretches_the_period() {
        // 10 tasks > sched_nr_latency 8: period = 10 × 0.75 ms, slice = 0.75 ms each.
        let n = forked(
            1,
            json!([{"name": "a"}]),
            json!([{"kind": "hog", "name": "h", "cgroup": "a", "threads": 10}]),
        );
        assert_eq!(n.sched_slice(n.tasks[0].se), 750_000);
    }

    #[test]
    fn slice_multiplies_down_the_hierarchy() {
        // Group a (2 tasks) beside group b (1 task), both 1024 shares, 1 CPU: 3 tasks → period
        // 6 ms; a's task: 6 × (1024/2048) × (1024/2048) = 1.5 ms; b's task: 6 × 1 × 1/2 = 3 ms.
        let n = forked(
            1,
            json!([{"name": "a"}, {"name": "b"}]),
            json!([{"kind": "hog", "name": "ha", "cgroup": "a", "threads": 2},
                   {"kind": "hog", "name": "hb", "cgroup": "b", "threads": 1}]),
        );
        assert_eq!(n.sched_slice(n.tasks[task_of(&n, 0)].se), 1_500_000);
        assert_eq!(n.sched_slice(n.tasks[task_of(&n, 1)].se), 3_000_000);
    }

    #[test]
    fn group_shares_follow_the_per_cpu_load() {
        // Group a (1024 shares): 2 tasks on one CPU, 1 on the other → scaled weights
        // 1024·1024 × 2048/3072 = 699050 (682.7 units) and 349525 (341.3 units). A cpu.idle
        // group's entity weighs 3·1024 × its share of the group's load, floored at the
        // unscaled MIN_SHARES = 2.
        let mut n = forked(
            2,
            json!([{"name": "a"}, {"name": "idle", "cpu.idle": 1}]),
            json!([{"kind": "hog", "name": "ha", "cgroup": "a", "threads": 3},
                   {"kind": "hog", "name": "hi", "cgroup": "idle", "threads": 2}]),
        );
        let ncpus = 2;
        let a = 1;
        let load0 = n.rqs[a * ncpus].load;
        let load1 = n.rqs[a * ncpus + 1].load;
        assert_eq!((load0.max(load1), load0.min(load1)), (2048 << 10, 1024 << 10));
        let (big, small) = if load0 > load1 { (0, 1) } else { (1, 0) };
        let gse = |n: &Node, cg: usize, cpu: usize| n.rqs[cg * ncpus + cpu].gse.unwrap();
        // Weights are refreshed lazily (at enqueue and tick), as in the kernel: tick both.
        for cpu in 0..2 {
            n.tick_wants_resched(cpu);
        }
        assert_eq!(n.ses[gse(&n, a, big)].weight, 699_050);
        assert_eq!(n.ses[gse(&n, a, small)].weight, 349_525);
        for cpu in 0..2 {
            let l = n.rqs[2 * ncpus + cpu].load;
            if l > 0 {
                let expect = (3072 * (l >> 10) / n.cgroups[2].total_load).clamp(2, 3072);
                assert_eq!(n.calc_group_shares(2 * ncpus + cpu), expect, "idle group on CPU {cpu}");
            }
        }
    }

    #[test]
    fn waking_sleeper_gets_half_a_latency_of_credit() {
        // place_entity(initial = 0): max(own vruntime, min_vruntime − sched_latency/2).
        let mut n = forked(
            1,
            json!([{"name": "a"}]),
            json!([{"kind": "hog", "name": "h", "cgroup": "a", "threads": 1}]),
        );
        n.run_until(100_000_000).unwrap();
        n.update_curr(0);
        let rq = n.root_rq(0);
        let min_v = n.rqs[rq].min_vruntime;
        // A fresh entity with vruntime 0 in the root queue.
        n.ses.push(crate::cfs_rq::Se::new(SeKind::Group(1), rq, NICE_0_LOAD));
        let se = n.ses.len() - 1;
        n.place_entity(rq, se, false);
        assert_eq!(n.ses[se].vruntime, min_v - 3_000_000);
    }

    #[test]
    fn wakeup_granularity_is_in_the_wakers_virtual_time() {
        assert_eq!(calc_delta_fair(1_000_000, NICE_0_LOAD), 1_000_000);
        assert_eq!(calc_delta_fair(1_000_000, 2 * NICE_0_LOAD), 500_000);
        assert_eq!(calc_delta_fair(3, 3 << 10), 1024);
    }
}
