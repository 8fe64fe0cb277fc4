//! The periodic balancer's group statistics and decisions as fair.c (6.6 – 6.18) has them:
//! `update_sg_lb_stats` → `group_classify` (has_spare < fully_busy < misfit < imbalanced <
//! overloaded), `update_sd_pick_busiest`, the checks of `find_busiest_group`,
//! `calculate_imbalance` by type (migrate_task / migrate_util / migrate_load, SD_PREFER_SIBLING's
//! `sibling_imbalance`, the NUMA allowance `adjust_numa_imbalance`), `find_busiest_queue`,
//! `detach_tasks` with `task_hot` (sysctl_sched_migration_cost, kernel-and-anchors.md §A3) and
//! `nr_balance_failed` escalation to active balance of the busiest CPU's running task.
//!
//! The pure arithmetic is in free functions over [`SgStats`] (tested by hand below); the
//! `Node` methods gather the statistics and move tasks.
//!
//! A CPU's load is the kernel's `cfs_rq_load_avg`: the root cfs_rq's PELT load average
//! (pelt.rs), which a migrated task's load leaves and joins at once (`detach`/`attach`), not
//! the instantaneous weight (that counted a service thread woken a moment ago at its group
//! entity's full weight — the group's shares over its few runnable threads, several hogs'
//! worth — and moved a hog off its CPU for it).
//!
//! A task's load (`task_h_load`, balance.rs) is its own PELT load average through its
//! hierarchy's h_load ratio: a task that sleeps most of the time weighs what it runs, not its
//! weight (the group levels' ratios are instantaneous weights — see there).
//!
//! Model reductions: a CPU's util here is
//! SCHED_CAPACITY_SCALE while it runs a task and 0 when idle (SIS_UTIL reads the PELT
//! util_avg instead, sis_util.rs),
//! its runnable SCHED_CAPACITY_SCALE × h_nr_running (the values PELT's util_avg / runnable_avg
//! converge to under steady load); every CPU has capacity SCHED_CAPACITY_SCALE (no RT/IRQ
//! pressure, equal capacities, so misfit never arises); the imbalanced type (tasks pinned by
//! affinity, `sgc->imbalance`) and group_smt_balance / asym packing are not raised.

use crate::events::Ns;
use crate::node::{Node, TaskState};
use crate::pelt;
use crate::topology::{CpuId, DomainLevel};

pub const SCHED_CAPACITY_SCALE: u64 = 1024;
/// `sysctl_sched_migration_cost` (kernel-and-anchors.md §A3): 0.5 ms.
pub const MIGRATION_COST_NS: Ns = 500_000;
/// NUMA_IMBALANCE_MIN: a pair of communicating tasks may stay on one node.
const NUMA_IMBALANCE_MIN: u64 = 2;
/// Tasks moved at most per balancing pass (`sysctl_sched_nr_migrate`).
const NR_MIGRATE: usize = 32;

/// `enum group_type`, in the kernel's order (a higher type is busier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum GroupType {
    #[default]
    HasSpare,
    FullyBusy,
    MisfitTask,
    Imbalanced,
    Overloaded,
}

/// `struct sg_lb_stats` (the fields the model fills).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SgStats {
    pub group_load: u64,
    pub group_util: u64,
    pub group_runnable: u64,
    pub group_capacity: u64,
    pub sum_nr_running: u64,
    pub sum_h_nr_running: u64,
    pub idle_cpus: u64,
    pub group_weight: u64,
    /// Physical cores in the group (`sg->cores`).
    pub cores: u64,
    pub group_imbalance: bool,
    pub avg_load: u64,
    pub group_type: GroupType,
}

/// `enum migration_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    Load,
    Util,
    Task,
}

/// The domain-level facts the decisions need (`struct lb_env` + `sd` flags).
#[derive(Debug, Clone, Copy)]
pub struct LbEnv {
    /// env->idle != CPU_NOT_IDLE.
    pub idle: bool,
    pub imbalance_pct: u64,
    /// The child domain has SD_PREFER_SIBLING (every non-NUMA level: SMT, MC).
    pub prefer_sibling: bool,
    /// SD_SHARE_LLC (SMT and MC).
    pub share_llc: bool,
    /// SD_NUMA, with its `imb_numa_nr`.
    pub numa: Option<u64>,
}

/// `group_is_overloaded`: more tasks than CPUs and util or runnable beyond the margin.
pub fn group_is_overloaded(imbalance_pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running <= s.group_weight {
        return false;
    }
    s.group_capacity * 100 < s.group_util * imbalance_pct || s.group_capacity * imbalance_pct < s.group_runnable * 100
}

/// `group_has_capacity`: fewer tasks than CPUs, or util and runnable within the margin.
pub fn group_has_capacity(imbalance_pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running < s.group_weight {
        return true;
    }
    if s.group_capacity * imbalance_pct < s.group_runnable * 100 {
        return false;
    }
    s.group_capacity * 100 > s.group_util * imbalance_pct
}

/// `group_classify` (without asym packing / smt_balance / misfit, see the module doc).
pub fn group_classify(imbalance_pct: u64, s: &SgStats) -> GroupType {
    if group_is_overloaded(imbalance_pct, s) {
        GroupType::Overloaded
    } else if s.group_imbalance {
        GroupType::Imbalanced
    } else if !group_has_capacity(imbalance_pct, s) {
        GroupType::FullyBusy
    } else {
        GroupType::HasSpare
    }
}

/// `update_sd_pick_busiest`: whether `sg` replaces `busiest` (None: the initial busiest_stat).
pub fn pick_busiest(sg: &SgStats, busiest: Option<&SgStats>) -> bool {
    if sg.sum_h_nr_running == 0 {
        return false;
    }
    let Some(b) = busiest else { return true };
    if sg.group_type != b.group_type {
        return sg.group_type > b.group_type;
    }
    match sg.group_type {
        GroupType::Overloaded | GroupType::FullyBusy => sg.avg_load > b.avg_load,
        // the first imbalanced (or misfit, unused) group stays
        GroupType::Imbalanced | GroupType::MisfitTask => false,
        // fewest idle CPUs, then most running tasks
        GroupType::HasSpare => {
            sg.idle_cpus < b.idle_cpus || (sg.idle_cpus == b.idle_cpus && sg.sum_nr_running > b.sum_nr_running)
        }
    }
}

/// `sibling_imbalance` (6.6+): how many tasks would even out running tasks per core.
pub fn sibling_imbalance(env: &LbEnv, busiest: &SgStats, local: &SgStats) -> u64 {
    if !env.idle || busiest.sum_nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (busiest.cores, local.cores);
    if nb == nl {
        return busiest.sum_nr_running.saturating_sub(local.sum_nr_running);
    }
    let mut imb = (nl * busiest.sum_nr_running).saturating_sub(nb * local.sum_nr_running);
    imb = (2 * imb + nl + nb) / (nl + nb);
    if imb <= 1 && local.sum_nr_running == 0 && busiest.sum_nr_running > 1 {
        imb = 2;
    }
    imb
}

/// `find_busiest_group`'s checks then `calculate_imbalance`: what to move and how much, or
/// None when the domain counts as balanced. `total` = (Σ group_load, Σ group_capacity).
pub fn find_imbalance(env: &LbEnv, local: &SgStats, busiest: &SgStats, total: (u64, u64)) -> Option<(Migration, u64)> {
    if busiest.sum_nr_running == 0 {
        return None;
    }
    let sds_avg = total.0 * SCHED_CAPACITY_SCALE / total.1.max(1);
    let forced = busiest.group_type == GroupType::Imbalanced;
    if !forced {
        if local.group_type > busiest.group_type {
            return None;
        }
        if local.group_type == GroupType::Overloaded
            && (local.avg_load >= busiest.avg_load
                || local.avg_load >= sds_avg
                || 100 * busiest.avg_load <= env.imbalance_pct * local.avg_load)
        {
            return None;
        }
        let spread =
            env.prefer_sibling && local.group_type == GroupType::HasSpare && sibling_imbalance(env, busiest, local) > 1;
        if !spread && busiest.group_type != GroupType::Overloaded {
            // Not overloaded: only an idle CPU pulls, and only if it leaves the groups' idle
            // CPUs more even (an SMT core's lone task stays).
            if !env.idle
                || (busiest.group_weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1)
                || busiest.sum_h_nr_running == 1
            {
                return None;
            }
        }
    }
    let found = calculate_imbalance(env, local, busiest, sds_avg);
    found.filter(|&(_, imb)| imb > 0)
}

/// `calculate_imbalance` by the busiest group's and the local group's types.
pub fn calculate_imbalance(env: &LbEnv, local: &SgStats, busiest: &SgStats, sds_avg: u64) -> Option<(Migration, u64)> {
    if busiest.group_type == GroupType::Imbalanced {
        return Some((Migration::Task, 1));
    }
    if local.group_type == GroupType::HasSpare {
        if busiest.group_type > GroupType::FullyBusy && !env.share_llc {
            // fill the local group's spare capacity
            let imb = local.group_capacity.max(local.group_util) - local.group_util;
            if env.idle && imb == 0 {
                return Some((Migration::Task, 1));
            }
            return Some((Migration::Util, imb));
        }
        let mut imb = if busiest.group_weight == 1 || env.prefer_sibling {
            sibling_imbalance(env, busiest, local)
        } else {
            local.idle_cpus.saturating_sub(busiest.idle_cpus)
        };
        if let Some(imb_numa_nr) = env.numa {
            imb = adjust_numa_imbalance(imb, local.sum_nr_running + 1, imb_numa_nr);
        }
        return Some((Migration::Task, imb >> 1));
    }
    if local.group_type < GroupType::Overloaded {
        // local->avg_load computed here in the kernel; the model's stats always carry it
        if local.avg_load >= busiest.avg_load || local.avg_load >= sds_avg {
            return None;
        }
    }
    let imb = (busiest.avg_load.saturating_sub(sds_avg) * busiest.group_capacity)
        .min(sds_avg.saturating_sub(local.avg_load) * local.group_capacity)
        / SCHED_CAPACITY_SCALE;
    Some((Migration::Load, imb))
}

/// `adjust_numa_imbalance`: a lightly loaded destination node keeps up to NUMA_IMBALANCE_MIN.
pub fn adjust_numa_imbalance(imbalance: u64, dst_running: u64, imb_numa_nr: u64) -> u64 {
    if dst_running > imb_numa_nr || imbalance > NUMA_IMBALANCE_MIN {
        imbalance
    } else {
        0
    }
}

/// `task_hot`: a task that ran less than the migration cost ago is cache-hot — except
/// SCHED_IDLE tasks and between SMT siblings (they share every cache).
pub fn task_hot(idle_policy: bool, smt_level: bool, now: Ns, exec_start: Ns) -> bool {
    !idle_policy && !smt_level && now.saturating_sub(exec_start) < MIGRATION_COST_NS
}

/// sd_init: cache_nice_tries 0 for SMT, 1 for MC, 2 for NUMA (kernel-and-anchors.md §A5).
pub fn cache_nice_tries(level: DomainLevel) -> u32 {
    match level {
        DomainLevel::Smt => 0,
        DomainLevel::Llc => 1,
        DomainLevel::Numa => 2,
    }
}

impl Node {
    /// `can_migrate_task`'s cache test: `t` is cache-hot for a move to `dst` at this domain
    /// `level` — it ran less than the migration cost ago (`task_hot`, from its exec_start), or
    /// the move would take it off its NUMA home (`migrate_degrades_locality`) — and the domain
    /// has not failed more than `cache_nice_tries` balances (`failed`): it stays where it is.
    pub(crate) fn held_hot(&self, t: crate::workload::TaskId, dst: CpuId, level: DomainLevel, failed: u32) -> bool {
        let task = &self.tasks[t];
        // (the model's clock before the kernel's exec_start: when the task last started to
        // wait — a wakeup's time for a woken task — kept where the release is not explicit)
        let ran = if self.tun.feat.cache_hot_pull {
            task.exec_start
        } else {
            task.wait_start
        };
        let hot = task_hot(task.idle_policy, level == DomainLevel::Smt, self.now, ran)
            || (level == DomainLevel::Numa && self.leaves_home(t, dst));
        hot && failed <= cache_nice_tries(level)
    }

    /// `update_sg_lb_stats` for one group of CPUs, summing only those not `excluded`
    /// (`env->cpus`); weight, capacity and cores (`sg->cores`, counted once in topology.rs)
    /// stay the whole group's.
    fn sg_stats(&self, cpus: &[CpuId], cores: u64, excluded: &[CpuId], imbalance_pct: u64) -> SgStats {
        let mut s = SgStats {
            group_weight: cpus.len() as u64,
            group_capacity: SCHED_CAPACITY_SCALE * cpus.len() as u64,
            cores,
            ..Default::default()
        };
        for &c in cpus {
            if excluded.contains(&c) {
                continue;
            }
            let r = &self.rqs[self.root_rq(c)];
            let nr = self.cpus[c].tasks.len() as u64;
            s.group_load += self.cpu_load(c);
            s.sum_nr_running += nr;
            s.sum_h_nr_running += r.h_nr_running as u64;
            s.group_runnable += SCHED_CAPACITY_SCALE * r.h_nr_running as u64;
            if self.cpus[c].curr.is_some() {
                s.group_util += SCHED_CAPACITY_SCALE;
            }
            if nr == 0 && self.cpus[c].curr.is_none() {
                s.idle_cpus += 1;
            }
        }
        s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        s.group_type = group_classify(imbalance_pct, &s);
        s
    }

    /// `cpu_load`: the root cfs_rq's PELT load average (`cfs_rq_load_avg`), brought to now as
    /// `update_blocked_averages` does before balancing — scaled (×1024) like the model's
    /// weights. Not the instantaneous weight: a service thread that ran 2 ms on a CPU weighs
    /// there what 2 ms of it adds to a 32 ms half-life average. The kernel's root average is
    /// the sum of its entities' averages (`enqueue_load_avg`), and a group entity's is its
    /// runnable time at its *current* weight: `reweight_entity` takes the old one out and puts
    /// the new one in at once. So the root's own average here holds its tasks, and each group
    /// entity of the CPU's top-level groups (queued, or blocked and decaying) adds its weight
    /// times its runnable average. With a group's weight re-divided between CPUs at every
    /// sleep and wakeup of its threads, the CPUs' loads move with it — what the balancer acts
    /// on (docs/replay.md, "Calibration").
    pub(crate) fn cpu_load(&self, cpu: CpuId) -> u64 {
        let root = self.root_rq(cpu);
        let r = &self.rqs[root];
        let mut load = r.avg.load_avg_at(self.now, r.load - r.group_load);
        let ncpus = self.ncpus();
        for &cg in &self.cgroups[crate::cgroup::ROOT].children {
            let Some(g) = self.rqs[cg * ncpus + cpu].gse else {
                continue;
            };
            let runnable = self.ses[g].avg.load_avg_at(self.now, self.avg_input(g));
            load += (self.ses[g].weight as u128 * runnable as u128 / pelt::RUNNABLE_UNIT as u128) as u64;
        }
        load
    }

    fn lb_env(&self, cpu: CpuId, d: usize) -> LbEnv {
        let dom = &self.topo.domains[cpu][d];
        let numa = (dom.level == DomainLevel::Numa).then(|| {
            // build_sched_domains: the first level above the LLC allows one task per LLC
            let llc = self.topo.socket_cpus[self.topo.socket_of[cpu]].len().max(1);
            let nr_llcs = dom.span.len() / llc;
            (if nr_llcs == 1 {
                dom.span.len() as u64 >> 3
            } else {
                nr_llcs as u64
            })
            .max(1)
        });
        LbEnv {
            idle: self.cpus[cpu].curr.is_none(),
            imbalance_pct: dom.level.imbalance_pct(),
            prefer_sibling: d > 0 && self.topo.domains[cpu][d - 1].level != DomainLevel::Numa,
            share_llc: dom.level != DomainLevel::Numa,
            numa,
        }
    }

    /// `find_busiest_queue`: the CPU of the busiest group to pull from, by migration type.
    fn busiest_queue(&self, cpus: &[CpuId], excluded: &[CpuId], mt: Migration, imbalance: u64) -> Option<CpuId> {
        let key = |c: CpuId| {
            let r = &self.rqs[self.root_rq(c)];
            match mt {
                Migration::Task => r.h_nr_running as u64,
                Migration::Util => self.cpus[c].curr.is_some() as u64,
                Migration::Load => self.cpu_load(c),
            }
        };
        let mut best: Option<(u64, CpuId)> = None;
        for &c in cpus {
            let r = &self.rqs[self.root_rq(c)];
            if r.h_nr_running == 0 || excluded.contains(&c) {
                continue;
            }
            // a lone task heavier than the imbalance would only move the imbalance
            if mt == Migration::Load && r.h_nr_running == 1 && self.cpu_load(c) > imbalance {
                continue;
            }
            let k = key(c);
            if best.is_none_or(|(bk, _)| k > bk) {
                best = Some((k, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// `load_balance` by group types for `cpu` at domain `d`; returns whether it moved a task.
    /// A busiest CPU whose every task is pinned away from `cpu` (LBF_ALL_PINNED) is left out
    /// and the choice made again among the others (`goto redo`).
    pub(crate) fn lb_groups_balance(&mut self, cpu: CpuId, d: usize) -> bool {
        let dom = self.topo.domains[cpu][d].clone();
        let env = self.lb_env(cpu, d);
        let mut excluded: Vec<CpuId> = vec![];
        loop {
            // update_sd_lb_stats: one pass over the groups keeps the local group's stats, the
            // busiest so far (`update_sd_pick_busiest` in group order) and the totals.
            let mut local = SgStats::default();
            let mut busiest: Option<(usize, SgStats)> = None;
            let mut total = (0, 0);
            for (g, cpus) in dom.groups.iter().enumerate() {
                let s = self.sg_stats(cpus, dom.group_cores[g], &excluded, env.imbalance_pct);
                if g == dom.local_group {
                    local = s;
                } else if pick_busiest(&s, busiest.as_ref().map(|(_, b)| b)) {
                    busiest = Some((g, s));
                }
                total = (total.0 + s.group_load, total.1 + s.group_capacity);
            }
            let found = busiest.and_then(|(b, bs)| find_imbalance(&env, &local, &bs, total).map(|f| (b, f)));
            let Some((bg, (mt, imbalance))) = found else {
                self.cpus[cpu].nr_balance_failed[d] = 0;
                return false;
            };
            let Some(src) = self.busiest_queue(&dom.groups[bg], &excluded, mt, imbalance) else {
                return false;
            };
            if self.cpus[src].tasks.iter().all(|&t| !self.allowed(t, cpu)) {
                excluded.push(src);
                let local_span = &dom.groups[dom.local_group];
                if dom.span.iter().all(|c| excluded.contains(c) || local_span.contains(c)) {
                    return false;
                }
                continue;
            }
            let failed = self.cpus[cpu].nr_balance_failed[d];
            let moved = self.detach_attach(src, cpu, dom.level, mt, imbalance as i64, failed);
            if moved > 0 {
                self.cpus[cpu].nr_balance_failed[d] = 0;
                return true;
            }
            self.cpus[cpu].nr_balance_failed[d] += 1;
            // need_active_balance → imbalanced_active_balance: spreading tasks failed too often
            if mt == Migration::Task && self.cpus[cpu].nr_balance_failed[d] > cache_nice_tries(dom.level) + 2 {
                self.cpus[cpu].nr_balance_failed[d] = cache_nice_tries(dom.level) + 1;
                return self.active_balance(src, cpu, dom.level);
            }
            return false;
        }
    }

    /// `detach_tasks` + `attach_tasks`: queued tasks of `src`, coldest first, within the
    /// imbalance; cache-hot ones only after cache_nice_tries failures. Returns how many moved.
    fn detach_attach(
        &mut self,
        src: CpuId,
        dst: CpuId,
        level: DomainLevel,
        mt: Migration,
        mut imbalance: i64,
        failed: u32,
    ) -> usize {
        // The candidates' buffer is kept between balances; the moved ones (at most
        // NR_MIGRATE) stay at its front for the preemption checks after the loop.
        let mut cands = std::mem::take(&mut self.lb_cands);
        cands.clear();
        cands.extend(
            self.cpus[src]
                .tasks
                .iter()
                .copied()
                .filter(|&t| self.can_migrate(t, dst)),
        );
        cands.sort_by_key(|&t| (self.leaves_home(t, dst), self.tasks[t].last_ran, t));
        let mut nr_moved = 0;
        for i in 0..cands.len() {
            let t = cands[i];
            if nr_moved >= NR_MIGRATE || imbalance <= 0 || self.cpus[src].tasks.len() <= 1 {
                break;
            }
            if self.held_hot(t, dst, level, failed) {
                continue;
            }
            let cost = match mt {
                Migration::Task => 1,
                Migration::Util => SCHED_CAPACITY_SCALE as i64,
                Migration::Load => {
                    // detach_tasks (fair.c 6.6–6.18, migrate_load): load = max(task_h_load(p),
                    // 1); skip it if shr_bound(load, nr_balance_failed) > imbalance — twice
                    // the imbalance after one failure, relaxed further after each (LB_MIN, off
                    // by default, is not modelled).
                    let load = (self.task_h_load(t) as i64).max(1);
                    // (The CPU loads are PELT averages (`cpu_load`) that a move carries along,
                    // so the next balance sees the moved load where it went: no guard against
                    // a move that swaps which CPU is heavier is needed, nor in the kernel.)
                    if (load >> failed.min(31)) > imbalance {
                        continue;
                    }
                    load
                }
            };
            if mt == Migration::Util && cost > imbalance {
                continue;
            }
            imbalance -= cost;
            self.move_task(t, dst);
            cands[nr_moved] = t;
            nr_moved += 1;
        }
        for &t in &cands[..nr_moved] {
            if self.tasks[t].cpu == dst && self.tasks[t].state == TaskState::Runnable {
                self.check_preempt_curr(dst, t);
            }
        }
        self.lb_cands = cands;
        nr_moved
    }

    /// `active_load_balance_cpu_stop`: the stopper preempts `src`'s running task and moves it
    /// to `dst` (if its affinity allows); `dst` runs it, then `src` picks again. Across NUMA
    /// nodes a task is not moved off its memory's node: the kernel would move it, and NUMA
    /// balancing (`task_numa_migrate`, every scan period) would move it back to its preferred
    /// node — the model keeps the net effect, not the round trip.
    fn active_balance(&mut self, src: CpuId, dst: CpuId, level: DomainLevel) -> bool {
        let Some(t) = self.cpus[src].curr else { return false };
        if self.cpus[src].blocking || !self.allowed(t, dst) || self.task_throttled(t) {
            return false;
        }
        if level == DomainLevel::Numa && self.leaves_home(t, dst) {
            return false;
        }
        self.preempt_off_cpu(src);
        self.move_task(t, dst);
        // dst takes it before src picks again (src's newly-idle pull must not take it back)
        self.check_preempt_curr(dst, t);
        self.schedule(src);
        true
    }

    /// NOHZ balancing for an idle CPU (`nohz_idle_balance` → `sched_balance_domains` with
    /// CPU_IDLE): each domain whose interval has passed balances by group types.
    pub(crate) fn idle_cpu_rebalance(&mut self, cpu: CpuId) {
        for d in 0..self.topo.domains[cpu].len() {
            if self.cpus[cpu].curr.is_some() {
                return;
            }
            if self.now >= self.cpus[cpu].next_balance[d] {
                if self.should_we_balance(cpu, d) {
                    self.update_idle_cpu_scan(cpu, d); // update_sd_lb_stats (sis_util.rs)
                    self.lb_groups_balance(cpu, d);
                }
                self.cpus[cpu].last_balance[d] = self.now;
                self.cpus[cpu].next_balance[d] = self.now + self.balance_interval(cpu, d);
            }
        }
    }

    /// `nohz_balancer_kick`'s LLC test: more than one busy CPU shares this CPU's LLC, so some
    /// idle CPU may be able to spread them (sd_llc_shared->nr_busy_cpus > 1).
    pub(crate) fn llc_busy_spread(&self, cpu: CpuId) -> bool {
        let llc = &self.topo.socket_cpus[self.topo.socket_of[cpu]];
        llc.iter().filter(|&&c| self.cpus[c].curr.is_some()).nth(1).is_some()
    }
}

#[cfg(test)]
mod tests {
    //! Hand-worked fair.c arithmetic: classification, busiest choice, imbalance by type,
    //! task_hot, and the active balance of a lone running task.
    use super::*;
    use crate::workload::TaskId;

    /// A group's stats from (weight, nr_running, idle CPUs, util, runnable, load).
    fn sg(weight: u64, nr: u64, idle: u64, util: u64, runnable: u64, load: u64, pct: u64) -> SgStats {
        let mut s = SgStats {
            group_weight: weight,
            group_capacity: 1024 * weight,
            cores: weight,
            sum_nr_running: nr,
            sum_h_nr_running: nr,
            idle_cpus: idle,
            group_util: util,
            group_runnable: runnable,
            group_load: load,
            ..Default::default()
        };
        s.avg_load = s.group_load * 1024 / s.group_capacity;
        s.group_type = group_classify(pct, &s);
        s
    }

    #[test]
    fn group_classify_each_type_from_sgs_numbers() {
        // 2 CPUs, 1 task: nr < weight → has_spare.
        assert_eq!(sg(2, 1, 1, 1024, 1024, 0, 117).group_type, GroupType::HasSpare);
        // 2 CPUs, 2 busy tasks: nr == weight, util 2048: 2048×100 = 204800 > 2048×117 = 239616?
        // no → no capacity → fully_busy (not overloaded: nr ≤ weight).
        assert_eq!(sg(2, 2, 0, 2048, 2048, 0, 117).group_type, GroupType::FullyBusy);
        // 2 tasks that each run half the time: util 1024: 204800 > 119808 → has_spare.
        assert_eq!(sg(2, 2, 0, 1024, 2048, 0, 117).group_type, GroupType::HasSpare);
        // 3 tasks on 2 CPUs: runnable 3072: 2048×117 = 239616 < 307200 → overloaded.
        assert_eq!(sg(2, 3, 0, 2048, 3072, 0, 117).group_type, GroupType::Overloaded);
        // 3 tasks mostly sleeping (util 1024, runnable 2048): 204800 < 119808? no; 239616 <
        // 204800? no → not overloaded; nr ≥ weight, runnable within margin, util 1024 < cap →
        // has_spare.
        assert_eq!(sg(2, 3, 0, 1024, 2048, 0, 117).group_type, GroupType::HasSpare);
        // One CPU, 2 tasks, SMT pct 110: 1024×110 = 112640 < 204800 → overloaded.
        assert_eq!(sg(1, 2, 0, 1024, 2048, 0, 110).group_type, GroupType::Overloaded);
        let mut pinned = sg(2, 2, 0, 1024, 2048, 0, 117);
        pinned.group_imbalance = true;
        assert_eq!(group_classify(117, &pinned), GroupType::Imbalanced);
    }

    #[test]
    fn pick_busiest_by_type_then_avg_load_then_idle_cpus() {
        let spare = sg(2, 1, 1, 1024, 1024, 1024, 117);
        let full = sg(2, 2, 0, 2048, 2048, 2048, 117);
        let full_heavy = sg(2, 2, 0, 2048, 2048, 4096, 117);
        let over = sg(2, 3, 0, 2048, 3072, 3072, 117);
        assert!(pick_busiest(&spare, None));
        assert!(pick_busiest(&full, Some(&spare)));
        assert!(!pick_busiest(&spare, Some(&full)));
        assert!(pick_busiest(&over, Some(&full_heavy)));
        assert!(pick_busiest(&full_heavy, Some(&full)));
        assert!(!pick_busiest(&full, Some(&full))); // equal avg_load: the first stays
                                                    // has_spare: fewer idle CPUs wins; equal idle CPUs → more running tasks wins
        let spare2 = sg(4, 3, 1, 3072, 3072, 0, 117);
        let spare3 = sg(4, 2, 1, 2048, 2048, 0, 117);
        assert!(pick_busiest(&spare2, Some(&spare3)));
        assert!(!pick_busiest(&spare3, Some(&spare2)));
        assert!(!pick_busiest(&sg(2, 0, 2, 0, 0, 0, 117), None));
    }

    fn env(idle: bool, prefer_sibling: bool) -> LbEnv {
        LbEnv {
            idle,
            imbalance_pct: 117,
            prefer_sibling,
            share_llc: true,
            numa: None,
        }
    }

    #[test]
    fn smt_prefer_sibling_spreads_a_shared_core_to_an_idle_core() {
        // MC level, groups are 2-thread cores. Local: an idle core (nr 0, 2 idle CPUs);
        // busiest: the service thread and a hog on sibling threads (fully_busy).
        let local = sg(2, 0, 2, 0, 0, 0, 117);
        let busiest = sg(2, 2, 0, 2048, 2048, 2 << 20, 117);
        assert_eq!(busiest.group_type, GroupType::FullyBusy);
        // equal cores: sibling_imbalance = 2 − 0 = 2 > 1 → force; migrate_task, 2 >> 1 = 1
        assert_eq!(sibling_imbalance(&env(true, true), &busiest, &local), 2);
        assert_eq!(
            find_imbalance(&env(true, true), &local, &busiest, (2 << 20, 4096)),
            Some((Migration::Task, 1))
        );
        // a busy CPU never pulls from a group that is not overloaded
        assert_eq!(
            find_imbalance(&env(false, true), &local, &busiest, (2 << 20, 4096)),
            None
        );
        // half-idle local core (one hog): 2 − 1 = 1, not > 1; then local idle 1 ≤ 0 + 1 → balanced
        let half = sg(2, 1, 1, 1024, 1024, 1 << 20, 117);
        assert_eq!(find_imbalance(&env(true, true), &half, &busiest, (3 << 20, 4096)), None);
        // without prefer_sibling (no SMT child) the idle-CPU rule: 2 idle ≤ 0 + 1? no →
        // migrate_task max(0, 2 − 0) >> 1 = 1
        assert_eq!(
            find_imbalance(&env(true, false), &local, &busiest, (2 << 20, 4096)),
            Some((Migration::Task, 1))
        );
    }

    #[test]
    fn sibling_imbalance_with_unequal_cores() {
        // local 2 cores with 1 task, busiest 4 cores with 8: 2×8 − 4×1 = 12;
        // (2×12 + 2 + 4) / 6 = 5
        let mut local = sg(4, 1, 3, 1024, 1024, 0, 117);
        local.cores = 2;
        let mut busiest = sg(8, 8, 0, 8192, 8192, 0, 117);
        busiest.cores = 4;
        assert_eq!(sibling_imbalance(&env(true, true), &busiest, &local), 5);
        // a tiny difference with an empty local group still moves one: imbalance 2
        let mut l0 = sg(2, 0, 2, 0, 0, 0, 117);
        l0.cores = 1;
        let mut b2 = sg(8, 2, 6, 2048, 2048, 0, 117);
        b2.cores = 4;
        // 1×2 − 0 = 2; (4 + 1 + 4) / 5 = 1 ≤ 1 with local empty and busiest > 1 → 2
        assert_eq!(sibling_imbalance(&env(true, true), &b2, &l0), 2);
    }

    #[test]
    fn overloaded_imbalance_is_the_avg_load_formula() {
        // 4 CPUs per group. busiest: 6 nice-0 tasks (load 6×1024), local: 4 tasks, + a third
        // group... here two groups: total load 10240, capacity 8192.
        let w = 1024;
        let busiest = sg(4, 6, 0, 4096, 6144, 6 * w, 117);
        let local = sg(4, 5, 0, 4096, 5120, 5 * w, 117);
        assert_eq!(busiest.group_type, GroupType::Overloaded);
        assert_eq!(local.group_type, GroupType::Overloaded);
        // avg_load = load×1024/capacity: busiest 6144×1024/4096 = 1536, local 1280
        assert_eq!((busiest.avg_load, local.avg_load), (1536, 1280));
        // sds avg = 11264×1024/8192 = 1408; 100×1536 = 153600 ≤ 117×1280 = 149760? no → go on;
        // imbalance = min((1536−1408)×4096, (1408−1280)×4096) / 1024 = 512 (half a task)
        assert_eq!(
            find_imbalance(&env(false, true), &local, &busiest, (11 * w, 8192)),
            Some((Migration::Load, 512))
        );
        // 5 vs 6 at pct 117 within margin if local had 6... local 6, busiest 7:
        // 100×1792 = 179200 ≤ 117×1536 = 179712 → balanced
        let b7 = sg(4, 7, 0, 4096, 7168, 7 * w, 117);
        let l6 = sg(4, 6, 0, 4096, 6144, 6 * w, 117);
        assert_eq!(find_imbalance(&env(false, true), &l6, &b7, (13 * w, 8192)), None);
        // fully_busy local, overloaded busiest: local avg 1024 < sds 1280 → migrate_load
        // min((1536−1280)×4096, (1280−1024)×4096)/1024 = 1024
        let lf = sg(4, 4, 0, 4096, 4096, 4 * w, 117);
        assert_eq!(lf.group_type, GroupType::FullyBusy);
        assert_eq!(
            find_imbalance(&env(false, true), &lf, &busiest, (10 * w, 8192)),
            Some((Migration::Load, 1024))
        );
    }

    #[test]
    fn has_spare_beside_an_overloaded_group_across_numa_fills_spare_util() {
        let numa = LbEnv {
            idle: true,
            imbalance_pct: 117,
            prefer_sibling: true,
            share_llc: false,
            numa: Some(2),
        };
        let local = sg(4, 1, 3, 1024, 1024, 1024, 117);
        let busiest = sg(4, 8, 0, 4096, 8192, 8192, 117);
        // capacity 4096 − util 1024 = 3072 of util to pull
        assert_eq!(
            find_imbalance(&numa, &local, &busiest, (9216, 8192)),
            Some((Migration::Util, 3072))
        );
        // NUMA allowance: a 2-task difference onto a node running ≤ imb_numa_nr stays
        assert_eq!(adjust_numa_imbalance(2, 1, 2), 0);
        assert_eq!(adjust_numa_imbalance(3, 1, 2), 3);
        assert_eq!(adjust_numa_imbalance(2, 3, 2), 2);
    }

    #[test]
    fn task_hot_within_the_migration_cost() {
        assert!(task_hot(false, false, 1_000_000, 600_000)); // 0.4 ms ago
        assert!(!task_hot(false, false, 1_000_000, 500_000)); // exactly 0.5 ms: cold
        assert!(!task_hot(true, false, 1_000_000, 900_000)); // SCHED_IDLE: never hot
        assert!(!task_hot(false, true, 1_000_000, 900_000)); // SMT siblings share caches
    }

    /// 2 cores × 2 threads (CPUs 0, 1 the first threads, 2, 3 their siblings): a service
    /// hog started on CPU 0, an offline hog on its sibling CPU 2, core 1 (CPUs 1, 3) idle;
    /// then the service may run anywhere.
    fn shared_core() -> (Node, TaskId) {
        let spec = serde_json::json!({
            "topology": {"cores_per_socket": 2, "threads_per_core": 2},
            "cgroups": [{"name": "svc", "cpuset.cpus": "0"}, {"name": "be", "cpuset.cpus": "2", "cpu.shares": 2}],
            "workloads": [
                {"kind": "hog", "name": "svc", "cgroup": "svc", "threads": 1},
                {"kind": "hog", "name": "be", "cgroup": "be", "threads": 1}
            ]
        });
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(1_000_000).unwrap();
        let svc = n.tasks.iter().position(|t| t.wl == 0).unwrap();
        assert_eq!(n.cpus[0].curr, Some(svc));
        assert!(n.cpus[2].curr.is_some());
        n.write("svc", "cpuset.cpus", "0-3").unwrap();
        assert_eq!(n.tasks[svc].cpu, 0);
        (n, svc)
    }

    #[test]
    fn active_balance_moves_a_lone_running_task_to_an_idle_core() {
        let (mut n, svc) = shared_core();
        // CPU 1 balances the whole-node level (d = 1: groups = cores); nothing is queued, so
        // three passes fail and the fourth exceeds cache_nice_tries + 2 = 3 (MC: 1 + 2).
        let d = 1;
        assert!(n.cpus[1].curr.is_none() && n.cpus[3].curr.is_none());
        for i in 1..=3 {
            assert!(!n.lb_groups_balance(1, d));
            assert_eq!(n.cpus[1].nr_balance_failed[d], i);
        }
        assert!(n.lb_groups_balance(1, d));
        // the stopper took CPU 0's running task (the first CPU with the most tasks)
        assert_eq!(n.tasks[svc].cpu, 1);
        assert_eq!(n.cpus[1].curr, Some(svc));
        assert_eq!(n.cpus[0].curr, None);
        assert_eq!(n.cpus[1].nr_balance_failed[d], 2); // cache_nice_tries + 1
                                                       // now each core has one task: 1 − 1 = 0, and idle CPUs 1 ≤ 1 + 1 → balanced
        assert!(!n.lb_groups_balance(3, d));
        assert_eq!(n.cpus[3].nr_balance_failed[d], 0);
    }

    #[test]
    fn nohz_balancing_spreads_the_shared_core_within_a_few_intervals() {
        // Left to run: the busy CPUs' balance events kick the NOHZ balancer, CPU 1 (first
        // idle CPU of the idle core) balances every 4 ms (span 4 CPUs, idle) and moves the
        // service on its fourth failed pass; by 100 ms the two hogs are on different cores.
        let (mut n, svc) = shared_core();
        n.run_until(100_000_000).unwrap();
        let core = |c: CpuId| n.topo.core_of[c];
        let be = 1 - svc;
        assert_ne!(core(n.tasks[svc].cpu), core(n.tasks[be].cpu));
    }

    /// 2 CPUs, one LLC (one domain level, a group per CPU): hogs of "a" (cpu.shares 256,
    /// pinned to CPU 0) and "b" (256, on CPU 1) run 1 s; then "c" (1024, pinned to CPU 1)
    /// starts a hog on CPU 1 and "b" may run anywhere.
    fn late_heavy_arrival() -> (Node, TaskId) {
        let spec = serde_json::json!({
            "topology": {"cores_per_socket": 2},
            "cgroups": [{"name": "a", "cpu.shares": 256, "cpuset.cpus": "0"},
                        {"name": "b", "cpu.shares": 256, "cpuset.cpus": "1"},
                        {"name": "c", "cpuset.cpus": "1"}],
            "workloads": [
                {"kind": "hog", "name": "a", "cgroup": "a", "threads": 1},
                {"kind": "hog", "name": "b", "cgroup": "b", "threads": 1},
                {"kind": "hog", "name": "c", "cgroup": "c", "threads": 1, "start_ns": 1_000_000_000u64}
            ]
        });
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(999_000_000).unwrap();
        n.write("b", "cpuset.cpus", "0-1").unwrap();
        let b = n.tasks.iter().position(|t| t.wl == 1).unwrap();
        (n, b)
    }

    #[test]
    fn a_forked_task_weighs_its_whole_weight_at_once() {
        // init_entity_runnable_average: a new task starts at its full load ("seen as heavy
        // until they get a chance to stabilize"), and attach_entity_cfs_rq propagates its full
        // runnable sum to its group's entity (update_tg_cfs_load: min(runnable_sum +
        // se->avg.load_sum, divider)), which counts at its whole weight at once.
        let (mut n, b) = late_heavy_arrival();
        // Saturated: each CPU's root average is its group entity's whole weight, 256 × 1024.
        let w = 256 * 1024;
        for c in 0..2 {
            assert!(n.cpu_load(c).abs_diff(w) <= w / 500, "cpu {c}: {}", n.cpu_load(c));
        }
        // c forked at 1 s on CPU 1: 0.1 ms later its entity weighs its 1024 × 1024 in full
        // (a group entity that started at 0 and ramped would add 2^20 × 0.2% ≈ 2k).
        n.run_until(1_000_100_000).unwrap();
        let c = n.cgroup_id("c").unwrap() * n.ncpus() + 1;
        assert_eq!(n.ses[n.rqs[c].gse.unwrap()].avg.load_avg, crate::pelt::RUNNABLE_UNIT);
        let l1 = n.cpu_load(1);
        assert!(l1.abs_diff(w + (1 << 20)) <= w / 500, "{l1}");
        // CPU 0's balance: local fully_busy (1 task), busiest overloaded (2 on 1 CPU);
        // imbalance = min(1 310 720 − 786 432, 786 432 − 262 144) = 524 288 ≥ b's 262 144:
        // b moves at CPU 0's next balance (busy: every 2 ms × busy_factor 16 = 32 ms), and
        // stays (c really is that heavy). With c's entity ramping from 0 it took ~200 ms.
        assert_eq!(n.tasks[b].cpu, 1);
        let mut moved_at = None;
        while n.now < 1_200_000_000 {
            n.run_until(n.now + 100_000).unwrap();
            if moved_at.is_none() && n.tasks[b].cpu == 0 {
                moved_at = Some(n.now);
            }
        }
        let at = moved_at.expect("b never moved");
        assert!(at <= 1_032_000_000, "b moved at {at}");
        assert_eq!(n.tasks[b].cpu, 0);
    }

    #[test]
    fn a_group_entity_that_tasks_leave_keeps_what_the_rest_were_runnable() {
        // update_tg_cfs_load, tasks leaving (a negative propagated sum): the group entity's
        // runnable sum becomes min(its own, the queue's load_sum / its weight now) — "assuming
        // all tasks are equally runnable" — but never below the running time left
        // (update_tg_cfs_util first). Group g on CPU 1: hog A always runnable since t = 0,
        // and B, which sleeps 1 s between 1 ms requests; B has just woken. Moving A away
        // leaves a queue whose average is B's: the entity, always runnable till now, keeps
        // about B's recent runnable time, not its own full history.
        let spec = serde_json::json!({
            "topology": {"cores_per_socket": 2},
            "kernel": {"scheduler": "eevdf", "version": "6.18.44"},
            "cgroups": [{"name": "g", "cpuset.cpus": "1"}],
            "workloads": [
                {"kind": "hog", "name": "a", "cgroup": "g", "threads": 1},
                {"kind": "closed_loop", "name": "b", "cgroup": "g", "clients": 1,
                 "service": {"dist": "constant", "value_ns": 1_000_000u64},
                 "think": {"dist": "constant", "value_ns": 1_000_000_000u64}}
            ]
        });
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        let a = n.tasks.iter().position(|t| t.wl == 0).unwrap();
        let b = n.tasks.iter().position(|t| t.wl == 1).unwrap();
        // B's second request: it wakes at ~1.002 s and preempts A or waits behind it
        n.run_until(1_001_000_000).unwrap();
        while n.tasks[b].state == TaskState::Sleeping {
            n.run_until(n.now + 50_000).unwrap();
            assert!(n.now < 1_100_000_000, "b never woke");
        }
        n.write("g", "cpuset.cpus", "0-1").unwrap();
        let g = n.rqs[n.cgroup_id("g").unwrap() * n.ncpus() + 1].gse.unwrap();
        let own = n.ses[g].avg.load_avg_at(n.now, n.avg_input(g));
        assert!(own > 1000, "always runnable so far: {own}");
        // B's own runnable average (× RUNNABLE_UNIT): its 1 ms requests once a second
        let b_runnable = n.task_load_avg(b) * 1024 / n.ses[n.tasks[b].se].weight;
        assert!(b_runnable < 80, "{b_runnable}");
        n.move_task(a, 0);
        let kept = n.ses[g].avg.load_avg;
        assert!(kept <= 2 * b_runnable + 16, "kept {kept}, b's {b_runnable}");
        // CPU 1 now weighs about B, not the group's whole weight (1024 × 1024)
        assert!(n.cpu_load(1) < 100 * 1024, "{}", n.cpu_load(1));
    }

    #[test]
    fn a_forked_root_task_joins_its_cpus_average_at_its_weight() {
        // post_init_entity_util_avg → attach_entity_cfs_rq: a task forked in the root cgroup
        // adds its initial load (its weight) to the root's load_avg at once; 0.1 ms later the
        // CPU weighs 1024 × 1024 (a ramp from 0 would give ~2k).
        let spec = serde_json::json!({
            "topology": {"cores_per_socket": 1},
            "workloads": [{"kind": "hog", "name": "h", "cgroup": "", "threads": 1, "start_ns": 5_000_000u64}]
        });
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(5_100_000).unwrap();
        let k = 1024u64 * 1024;
        assert!(n.cpu_load(0).abs_diff(k) <= k / 100, "{}", n.cpu_load(0));
    }

    #[test]
    fn a_group_entitys_new_weight_counts_in_the_cpus_load_at_once() {
        // reweight_entity: dequeue_load_avg, se->avg.load_avg = se_weight × load_sum /
        // divider at the new weight, enqueue_load_avg — the root's load_avg follows a group
        // entity's weight at once, not over the next ~100 ms of PELT. One CPU, a hog in each
        // of two groups at 1024 for 1 s (both entities always runnable: each weighs its
        // whole weight); a's shares to 3072: a tick later the CPU weighs 3072 + 1024.
        let spec = serde_json::json!({
            "topology": {"cores_per_socket": 1},
            "kernel": {"scheduler": "eevdf", "version": "6.18.44"},
            "cgroups": [{"name": "a"}, {"name": "b"}],
            "workloads": [
                {"kind": "hog", "name": "a", "cgroup": "a", "threads": 1},
                {"kind": "hog", "name": "b", "cgroup": "b", "threads": 1}
            ]
        });
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(1_000_000_000).unwrap();
        let k = 1024u64 * 1024;
        assert!(n.cpu_load(0).abs_diff(2 * k) <= 2 * k / 50, "{}", n.cpu_load(0));
        n.write_knob("a", "cpu.shares", 3072).unwrap();
        n.run_until(1_009_000_000).unwrap(); // a tick of each group's hog (HZ 250) since
        assert_eq!(n.ses[n.rqs[n.cgroup_id("a").unwrap()].gse.unwrap()].weight, 3 * k);
        assert!(n.cpu_load(0).abs_diff(4 * k) <= 4 * k / 50, "{}", n.cpu_load(0));
    }

    #[test]
    fn a_balancer_move_carries_the_tasks_load_between_the_averages() {
        // attach/detach: when b moves, CPU 1's average drops by b's load and CPU 0's rises by
        // it at once (not over the next ~100 ms of decay and ramp).
        let (mut n, b) = late_heavy_arrival();
        n.run_until(1_010_000_000).unwrap();
        let w = 256 * 1024;
        let mut before = (0, 0);
        while n.tasks[b].cpu == 1 {
            before = (n.cpu_load(0), n.cpu_load(1));
            n.run_until(n.now + 100_000).unwrap();
            assert!(n.now < 2_000_000_000, "b never moved");
        }
        // Within 0.1 ms of the move: CPU 0 holds a's and b's entities (≈ 2 × 256k), CPU 1
        // lost b's 256k (c's ≈ 1024k × (1 − y^n) stays), up to the 0.1 ms of averaging.
        let (l0, l1) = (n.cpu_load(0), n.cpu_load(1));
        assert!(l0.abs_diff(before.0 + w) <= w / 50, "{before:?} → {l0}");
        assert!(l1.abs_diff(before.1 - w) <= w / 50, "{before:?} → {l1}");
    }

    #[test]
    fn detach_tasks_skips_a_task_heavier_than_the_imbalance_shifted_by_the_failures() {
        // fair.c detach_tasks, migrate_load: load = max(task_h_load(p), 1); `if
        // (shr_bound(load, env->sd->nr_balance_failed) > env->imbalance) goto next`. b waits
        // on CPU 1 (c runs); alone in its 256-share group, whose entity weighs 256·1024 over
        // b's NICE_0: ratio 1/4. With b's own average set to 800·1024 (it has run 0.78 of the
        // time, say), task_h_load = 204 800. No failures: imbalance 204 799 keeps it,
        // 204 800 takes it; after one failure half of it counts: 102 399 keeps, 102 400 takes.
        for (failed, imbalance, moves) in [
            (0, 204_799, false),
            (0, 204_800, true),
            (1, 102_399, false),
            (1, 102_400, true),
        ] {
            let (mut n, b) = late_heavy_arrival();
            n.run_until(1_010_000_000).unwrap();
            assert_eq!((n.tasks[b].cpu, n.tasks[b].state), (1, TaskState::Runnable));
            let se = n.tasks[b].se;
            n.ses[se].avg = crate::pelt::Avg::runnable_from(n.now, 800 * 1024);
            assert_eq!(n.task_h_load(b), 204_800.0);
            let moved = n.detach_attach(1, 0, DomainLevel::Llc, Migration::Load, imbalance, failed);
            assert_eq!(
                (moved == 1, n.tasks[b].cpu == 0),
                (moves, moves),
                "failed {failed}, imbalance {imbalance}"
            );
        }
    }

    #[test]
    fn a_sleeper_woken_on_another_cpu_takes_its_blocked_load_along() {
        // remove_entity_load_avg / attach_entity_load_avg on a wakeup migration: the wakee's
        // load leaves prev's root average and joins the new CPU's at once. Two CPUs, a service
        // thread alone in its group (ratio 1) that ran 20 ms on CPU 0 and has slept 10 ms; a
        // hog pinned to CPU 0 started meanwhile, so try_to_wake_up's select_idle_sibling
        // (prev busy, CPU 1 idle) wakes it on CPU 1.
        let spec = serde_json::json!({
            "topology": {"cores_per_socket": 2},
            "cgroups": [{"name": "s"}, {"name": "h", "cpuset.cpus": "0"}],
            "workloads": [{"kind": "closed_loop", "name": "s", "cgroup": "s", "clients": 1,
                "service": {"dist": "constant", "value_ns": 20_000_000u64},
                "think": {"dist": "constant", "value_ns": 1_000_000_000_000u64}},
                {"kind": "hog", "name": "h", "cgroup": "h", "threads": 1, "start_ns": 25_000_000u64}]
        });
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(30_000_000).unwrap();
        let t = n.tasks.iter().position(|t| t.wl == 0).unwrap();
        assert_eq!((n.tasks[t].state, n.tasks[t].cpu), (TaskState::Sleeping, 0));
        // its load, decayed over 10 ms of sleep (20 ms of running: 1 − y^19 ≈ 0.34 of its
        // weight, × y^9.5 ≈ 0.81), is still counted on CPU 0 (blocked load) — there as its
        // group entity's runnable average at the entity's weight, which the group's queue
        // emptied of runnable tasks gives up when it leaves (`update_tg_cfs_load`), and which
        // the group's entity on CPU 1 takes on; the entity's average and the task's own differ
        // by where their PELT periods fall (0.3% here)
        let tl = n.task_h_load_on(t, 0) as u64;
        let before = (n.cpu_load(0), n.cpu_load(1));
        assert!((250_000..320_000).contains(&tl) && before.0 >= tl, "{tl} {before:?}");
        n.try_to_wake_up(t);
        assert_eq!(n.tasks[t].cpu, 1);
        let after = (n.cpu_load(0), n.cpu_load(1));
        assert!(
            after.0.abs_diff(before.0 - tl) <= tl / 100,
            "{before:?} → {after:?}, {tl}"
        );
        assert!(
            after.1.abs_diff(before.1 + tl) <= tl / 100,
            "{before:?} → {after:?}, {tl}"
        );
    }
}
