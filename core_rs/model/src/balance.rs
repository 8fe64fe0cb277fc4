//! Where tasks run: wakeup placement (`wake_wide`, `wake_affine`, `select_idle_sibling`),
//! fork placement, newly-idle pulling, NOHZ idle balancing and periodic load balancing per
//! scheduling domain
//! (kernel-and-anchors.md §A5). A CPU that runs only SCHED_IDLE / cpu.idle / offline work
//! counts as idle for placement (`sched_idle_cpu`) and as not busy for balancing intervals.
//!
//! Balancing bound (what the work-conservation test checks, without an explicit release): a
//! CPU never stays idle for more than one scheduler tick while a task that could run there
//! waits on another CPU — newly-idle pulling covers tasks already waiting when a CPU goes
//! idle, and the NOHZ kick at the next tick covers tasks that start waiting while a CPU is
//! idle. With an explicit release the pull is the kernel's: a cache-hot task (it ran less than
//! the migration cost ago) stays until the idle CPU's own periodic balances have failed more
//! than cache_nice_tries times (`SchedFeatures::cache_hot_pull`), so a CPU can idle beside a
//! queue of recently run tasks, as the host's does (docs/model.md, "Worker pools"). Periodic
//! and NOHZ idle balancing by group types, cache hotness and active balance are in
//! lb_groups.rs. NI_RANDOM's die before each domain's newly-idle pull: newidle.rs. Not
//! modelled here: `avg_idle` gating of newidle balance. SIS_UTIL's scan
//! limit and the PELT util it is computed from: sis_util.rs.

use crate::events::{Event, Ns};
use crate::node::{Node, TaskState};
use crate::topology::CpuId;
use crate::workload::TaskId;

/// A task waking others from its own context (`current` in `select_task_rq_fair`): its CPU,
/// itself, and whether it is about to block (WF_SYNC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waker {
    pub cpu: CpuId,
    pub task: TaskId,
    pub sync: bool,
}

/// What a task has woken, for `wake_wide` (task_struct's `last_wakee`, `wakee_flips`,
/// `wakee_flip_decay_ts`). A task starts with none (`Default`): the model's tasks are forked
/// at the start, before they wake anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wakee {
    pub last: Option<TaskId>,
    pub flips: u32,
    /// jiffies of the last halving of `flips`.
    pub decay_ts: u64,
}

impl Wakee {
    /// `record_wakee(p)` on `current` (fair.c 6.6–6.18, from `select_task_rq_fair` on every
    /// WF_TTWU wakeup): once more than HZ jiffies (a second) passed since the last halving,
    /// halve the flips — once, however long it was (`time_after(jiffies, ts + HZ)`); then a
    /// wakee other than the last one is a flip.
    pub fn record(&mut self, p: TaskId, jiffies: u64, hz: u64) {
        if jiffies > self.decay_ts + hz {
            self.flips >>= 1;
            self.decay_ts = jiffies;
        }
        if self.last != Some(p) {
            self.last = Some(p);
            self.flips += 1;
        }
    }
}

/// `wake_wide(p)` (fair.c 6.6–6.18): the waker (`current`) and the wakee look like one of
/// an M:N relation wider than the LLC — the less flipping of the two flips at least
/// `llc_size` (`sd_llc_size` of the waking CPU) times a second, the other at least
/// `llc_size` times as often — so the wakee is not pulled to the waker's CPU.
pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_size: u32) -> bool {
    let (master, slave) = (waker_flips.max(wakee_flips) as u64, waker_flips.min(wakee_flips) as u64);
    let factor = llc_size as u64;
    !(slave < factor || master < slave * factor)
}

/// Which of a CPU's two idle states (`idle_for_wake`, `truly_idle`) it was last counted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleFlags {
    pub for_wake: bool,
    pub truly: bool,
}

impl IdleFlags {
    /// A CPU with nothing queued and nothing running.
    pub const BOTH: IdleFlags = IdleFlags {
        for_wake: true,
        truly: true,
    };
}

/// How many CPUs of one LLC are idle for wakeup placement, and how many are truly idle: the
/// kernel keeps the like per LLC (`sd_llc_shared`: `has_idle_cores`, and SIS_UTIL's
/// `nr_idle_scan`) so that `select_idle_sibling` can skip its scans on a busy LLC. Here they
/// are exact counts, so a scan is skipped only when it could not have found a CPU: the same
/// placement as scanning, in O(1) while the whole LLC is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LlcIdle {
    /// CPUs with `idle_for_wake`.
    pub for_wake: u32,
    /// CPUs with `truly_idle` (an idle core needs all its CPUs so).
    pub truly: u32,
    /// SIS_UTIL's `sd_llc_shared->nr_idle_scan`, as the last periodic balance of the LLC
    /// domain left it (sis_util.rs).
    pub nr_idle_scan: u32,
}

impl LlcIdle {
    /// Every CPU idle: a node before its first task.
    pub fn all_idle(topo: &crate::topology::Topology) -> Vec<LlcIdle> {
        topo.socket_cpus
            .iter()
            .map(|c| LlcIdle {
                for_wake: c.len() as u32,
                truly: c.len() as u32,
                // as a balance of the idle LLC leaves it (the kernel's starts at 0 at boot,
                // long before any workload: a node that has been idle has its LLC's width)
                nr_idle_scan: c.len() as u32,
            })
            .collect()
    }
}

impl Node {
    /// `available_idle_cpu || sched_idle_cpu`: nothing runnable, or only idle-class work.
    #[inline]
    pub(crate) fn idle_for_wake(&self, cpu: CpuId) -> bool {
        let r = &self.rqs[self.root_rq(cpu)];
        r.h_nr_running == r.idle_h_nr_running
    }

    #[inline]
    fn truly_idle(&self, cpu: CpuId) -> bool {
        self.rqs[self.root_rq(cpu)].h_nr_running == 0 && self.cpus[cpu].curr.is_none()
    }

    /// Re-count `cpu` in its LLC's idle counts: called after every change of its root
    /// queue's runnable counts (cfs.rs `enqueue_chain`, `dequeue_chain`, a delayed task's
    /// requeue) and of its running task (`schedule`, `preempt_off_cpu`) — the only writers.
    /// The root cfs_rq's util_avg follows whether a task runs (sis_util.rs `CpuUtil`).
    #[inline]
    pub(crate) fn refresh_idle(&mut self, cpu: CpuId) {
        let running = self.cpus[cpu].curr.is_some();
        self.cpus[cpu].util.set_running(self.now, running);
        let now = IdleFlags {
            for_wake: self.idle_for_wake(cpu),
            truly: self.truly_idle(cpu),
        };
        let was = std::mem::replace(&mut self.cpus[cpu].idle_counted, now);
        if was != now {
            let l = &mut self.llc_idle[self.topo.socket_of[cpu]];
            l.for_wake = l.for_wake + now.for_wake as u32 - was.for_wake as u32;
            l.truly = l.truly + now.truly as u32 - was.truly as u32;
        }
    }

    /// The LLC idle counts agree with the CPUs' states (for `check_invariants`).
    pub(crate) fn check_llc_idle(&self) -> Result<(), String> {
        for (s, cpus) in self.topo.socket_cpus.iter().enumerate() {
            let want = LlcIdle {
                for_wake: cpus.iter().filter(|&&c| self.idle_for_wake(c)).count() as u32,
                truly: cpus.iter().filter(|&&c| self.truly_idle(c)).count() as u32,
                nr_idle_scan: self.llc_idle[s].nr_idle_scan,
            };
            if self.llc_idle[s] != want {
                return Err(format!("LLC {s}: idle counts {:?} but {want:?}", self.llc_idle[s]));
            }
            if self.llc_idle[s].nr_idle_scan > cpus.len() as u32 {
                return Err(format!(
                    "LLC {s}: nr_idle_scan {} beyond its width",
                    self.llc_idle[s].nr_idle_scan
                ));
            }
        }
        for (c, cpu) in self.cpus.iter().enumerate() {
            if cpu.util.running != cpu.curr.is_some() {
                return Err(format!("CPU {c}: util counted running = {}", cpu.util.running));
            }
        }
        Ok(())
    }

    /// `select_task_rq_fair` for a wakeup: a task waking it (`self.waker`, the kernel's
    /// `current`) first records it (`record_wakee`); the target is the previous CPU, or —
    /// with WA_IDLE / WA_WEIGHT on and unless `wake_wide` — the waker's CPU when
    /// `wake_affine` says so; then `select_idle_sibling(prev, target)`. A wide wakeup takes
    /// the same fast path with target = prev: want_affine is 0, and no domain has
    /// SD_BALANCE_WAKE (the default), so the domain walk breaks at the first level with no
    /// `sd` and `find_idlest_cpu` is not called. Not modelled: `recent_used_cpu`; flips from
    /// wakeups by timers, IO and the node — the model records nothing for them, where the
    /// kernel records them on whatever the interrupt found running (a task, or the idle
    /// task), so a task running where timers fire flips more there than here.
    pub(crate) fn select_task_rq(&mut self, t: TaskId, prev: CpuId) -> CpuId {
        let target = match self.waker {
            Some(w) => {
                let wide = self.record_wakee(w, t);
                if w.task != t && !wide {
                    self.wake_affine(t, w, prev)
                } else {
                    prev
                }
            }
            None => prev,
        };
        self.select_idle_sibling(t, prev, target)
    }

    /// `record_wakee(t)` on the waker, then `wake_wide(t)` against the waking CPU's LLC size.
    /// core.c `select_task_rq` calls the class's only for a task allowed on more than one CPU
    /// (`nr_cpus_allowed > 1`): waking a pinned task is no flip.
    fn record_wakee(&mut self, w: Waker, t: TaskId) -> bool {
        if self.allowed_cpus(self.tasks[t].cg) <= 1 {
            return false;
        }
        let tick = self.tun.tick_ns;
        self.tasks[w.task]
            .wakee
            .record(t, self.now / tick, 1_000_000_000 / tick);
        let llc = self.topo.socket_cpus[self.topo.socket_of[w.cpu]].len() as u32;
        wake_wide(self.tasks[w.task].wakee.flips, self.tasks[t].wakee.flips, llc)
    }

    /// `wake_affine`: the waker's CPU (`this`) or the wakee's previous one, on the lowest
    /// domain that spans both (SD_WAKE_AFFINE is set on all of them). `wake_affine_idle`
    /// first; if it has no answer, `wake_affine_weight`; anything but `this` means prev.
    fn wake_affine(&self, t: TaskId, w: Waker, prev: CpuId) -> CpuId {
        let f = &self.tun.feat;
        let this = w.cpu;
        // want_affine needs the waker's CPU in the wakee's cpuset; `cpu == prev_cpu` skips it
        if this == prev || !(f.wa_idle || f.wa_weight) || !self.allowed(t, this) {
            return prev;
        }
        let Some(dom) = self.topo.domains[this].iter().find(|d| d.span.contains(&prev)) else {
            return prev;
        };
        let mut target = None;
        if f.wa_idle {
            target = self.wake_affine_idle(this, prev, w.sync);
        }
        if f.wa_weight && target.is_none() {
            target = self.wake_affine_weight(t, w, prev, dom.level.imbalance_pct());
        }
        if target == Some(this) {
            this
        } else {
            prev
        }
    }

    /// `wake_affine_idle` (fair.c, 6.15+ with `cfs_h_nr_delayed`): an idle waking CPU sharing
    /// the LLC with prev takes the wakee unless prev is idle too (an interrupt woke it); a
    /// sync waker that is alone on its CPU (delayed entities not counted) hands it over;
    /// otherwise an idle prev keeps it; else no answer.
    fn wake_affine_idle(&self, this: CpuId, prev: CpuId, sync: bool) -> Option<CpuId> {
        let shares_cache = self.topo.socket_of[this] == self.topo.socket_of[prev];
        if self.truly_idle(this) && shares_cache {
            return Some(if self.truly_idle(prev) { prev } else { this });
        }
        if sync && self.rqs[self.root_rq(this)].h_nr_running == 1 {
            return Some(this);
        }
        if self.truly_idle(prev) {
            return Some(prev);
        }
        None
    }

    /// `wake_affine_weight` (fair.c 6.6–6.18): the waker's CPU if its `cpu_load` with the
    /// wakee's `task_h_load` added (and, for a sync wakeup, the waker's own taken away) is
    /// below prev's `cpu_load` without the wakee's (its blocked load is still counted there),
    /// prev favoured by half the domain's imbalance_pct (WA_BIAS); a sync tie goes to the
    /// waker. Loads are PELT averages (`cpu_load`, `task_h_load`), so a wakee that sleeps most
    /// of the time weighs little. CPU capacities are equal (the model's SMT and NUMA speeds are
    /// not capacities).
    fn wake_affine_weight(&self, t: TaskId, w: Waker, prev: CpuId, imbalance_pct: u64) -> Option<CpuId> {
        let bias = self.tun.feat.wa_bias;
        let mut this_eff = self.cpu_load(w.cpu) as f64;
        if w.sync {
            let current = self.task_h_load(w.task);
            if current > this_eff {
                return Some(w.cpu);
            }
            this_eff -= current;
        }
        let task_load = self.task_h_load_on(t, prev);
        this_eff += task_load;
        if bias {
            this_eff *= 100.0;
        }
        let mut prev_eff = self.cpu_load(prev) as f64 - task_load;
        if bias {
            prev_eff *= (100 + (imbalance_pct - 100) / 2) as f64;
        }
        if w.sync {
            prev_eff += 1.0;
        }
        (this_eff < prev_eff).then_some(w.cpu)
    }

    /// `select_idle_sibling(p, prev, target)`: the target if it is idle; prev if it is idle
    /// and shares the target's LLC; else an idle core of the target's LLC (SMT), else an idle
    /// CPU of it scanned from target + 1, else the target. Wakeups do not leave the LLC
    /// (balancing does that) unless the target is outside the task's cpuset
    /// (`select_fallback_rq`). Only allowed CPUs. With target = prev, the placement the model
    /// always had.
    pub(crate) fn select_idle_sibling(&self, t: TaskId, prev: CpuId, target: CpuId) -> CpuId {
        let ok = |c: CpuId| self.allowed(t, c);
        if ok(target) && self.idle_for_wake(target) {
            return target;
        }
        if prev != target
            && ok(prev)
            && self.topo.socket_of[prev] == self.topo.socket_of[target]
            && self.idle_for_wake(prev)
        {
            return prev;
        }
        let prev = target;
        let llc_id = self.topo.socket_of[prev];
        let idle = self.llc_idle[llc_id];
        // Nothing idle in the LLC: both scans would come back empty (`LlcIdle`).
        if idle.for_wake > 0 {
            if let Some(c) = self.scan_llc(t, prev, llc_id, idle.truly > 0) {
                return c;
            }
        }
        if ok(prev) {
            return prev;
        }
        // select_fallback_rq: an idle allowed CPU anywhere, else the least busy allowed one.
        (0..self.ncpus())
            .filter(|&c| ok(c))
            .min_by_key(|&c| (!self.idle_for_wake(c), self.cpus[c].tasks.len(), c))
            .expect("a task's cpuset is never empty")
    }

    /// `select_idle_core`, then `select_idle_cpu`, over the LLC from `prev` + 1 — called only
    /// when its `LlcIdle` counts say there is something to find (with no CPU truly idle there
    /// is no idle core). Only the idle-CPU scan, done when no core is idle, looks at no more
    /// allowed CPUs than SIS_UTIL's `nr_idle_scan` (the idle-core scan is not limited).
    fn scan_llc(&self, t: TaskId, prev: CpuId, llc_id: usize, any_truly_idle: bool) -> Option<CpuId> {
        let ok = |c: CpuId| self.allowed(t, c);
        let llc = &self.topo.socket_cpus[llc_id];
        let start = llc.iter().position(|&c| c == prev).unwrap_or(0);
        let n = llc.len();
        let from_next = (1..n).map(|i| llc[(start + i) % n]);
        let mut limit = self.idle_scan_limit(llc_id);
        if any_truly_idle && self.topo.core_cpus[0].len() > 1 {
            let idle_core = |c: CpuId| self.topo.siblings(c).iter().all(|&s| self.truly_idle(s));
            if let Some(c) = from_next.clone().find(|&c| ok(c) && idle_core(c)) {
                return Some(c);
            }
            limit = None; // has_idle_core: select_idle_core's pass notes any idle CPU it meets
        }
        self.first_idle_within(from_next.filter(|&c| ok(c)), limit)
    }

    /// `find_idlest_cpu` for a new task: among its allowed CPUs, fewest runnable tasks, then
    /// the least busy core, then the least load, then the lowest id.
    pub(crate) fn select_fork_cpu(&self, t: TaskId) -> CpuId {
        (0..self.ncpus())
            .filter(|&c| self.allowed(t, c))
            .min_by_key(|&c| {
                let nr = self.cpus[c].tasks.len();
                let core: usize = self.topo.siblings(c).iter().map(|&s| self.cpus[s].tasks.len()).sum();
                (nr, core, self.rqs[self.root_rq(c)].load, c)
            })
            .expect("a task's cpuset is never empty")
    }

    /// Queued (not running, not throttled) tasks of `cpu` that may run on `dst`.
    fn movable(&self, cpu: CpuId, dst: CpuId) -> impl Iterator<Item = TaskId> + '_ {
        self.cpus[cpu]
            .tasks
            .iter()
            .copied()
            .filter(move |&t| self.can_migrate(t, dst))
    }

    /// `can_migrate_task`: queued (not running), allowed on `dst`, and its group hierarchy
    /// throttled neither where it is nor on `dst` (`throttled_lb_pair`).
    pub(crate) fn can_migrate(&self, t: TaskId, dst: CpuId) -> bool {
        self.tasks[t].state == TaskState::Runnable
            && !self.on_wake_list(self.tasks[t].cpu)
            && self.allowed(t, dst)
            && !self.task_throttled(t)
            && !self.hierarchy_throttled_on(self.tasks[t].cg, dst)
    }

    /// Some cfs_rq of `cg` or an ancestor is throttled on `cpu`.
    fn hierarchy_throttled_on(&self, cg: usize, cpu: CpuId) -> bool {
        let ncpus = self.ncpus();
        let mut g = Some(cg);
        while let Some(c) = g {
            if self.rqs[c * ncpus + cpu].throttled.any() {
                return true;
            }
            g = self.cgroups[c].parent;
        }
        false
    }

    fn nr_movable(&self, cpu: CpuId) -> usize {
        if self.on_wake_list(cpu) {
            return 0;
        }
        let r = &self.rqs[self.root_rq(cpu)];
        (r.h_nr_running as usize).saturating_sub(self.cpus[cpu].curr.is_some() as usize)
    }

    /// Whether moving `t` to `dst` takes it away from its memory (NUMA home node).
    pub(crate) fn leaves_home(&self, t: TaskId, dst: CpuId) -> bool {
        self.tasks[t].home_node.is_some_and(|h| h != self.topo.numa_of[dst])
    }

    /// Which task balancing takes first: non-idle before idle-class, then one that stays on
    /// its NUMA node, then the one that has not run for longest (the tail of the kernel's
    /// cfs_tasks list), then the lowest id.
    fn pick_movable(&self, cpu: CpuId, dst: CpuId) -> Option<TaskId> {
        self.movable(cpu, dst).min_by_key(|&t| self.pull_order(t, dst))
    }

    /// Which waiting task a pull to `dst` takes first: not SCHED_IDLE, staying on its NUMA
    /// home, the longest off a CPU.
    fn pull_order(&self, t: TaskId, dst: CpuId) -> (bool, bool, Ns, TaskId) {
        (
            self.tasks[t].idle_policy,
            self.leaves_home(t, dst),
            self.tasks[t].last_ran,
            t,
        )
    }

    /// `newidle_balance`: this CPU has nothing to run; pull one waiting task it may run from
    /// the CPU with the most waiting work, nearest domain first. Returns whether it pulled.
    /// A cache-hot task stays where it is (`can_migrate_task` in the newly-idle
    /// `load_balance`: it ran less than sysctl_sched_migration_cost ago, and the domain's
    /// periodic balances have not failed more than cache_nice_tries times — a newly-idle
    /// balance never counts as a failure). Each domain's next periodic balance comes in to
    /// its last one plus the idle interval (`sched_balance_newidle`'s `update_next_balance`
    /// with busy = 0), where the idle CPU's own balances count the failures that let a hot
    /// task go (lb_groups.rs `idle_cpu_rebalance`). Without an explicit release (the model's
    /// older placement, `SchedFeatures::cache_hot_pull`) any waiting task is pulled at once.
    pub(crate) fn newidle_balance(&mut self, cpu: CpuId) -> bool {
        let cache_hot = self.tun.feat.cache_hot_pull;
        if cache_hot {
            for d in 0..self.topo.domains[cpu].len() {
                let idle_next = self.cpus[cpu].last_balance[d] + self.sd_balance_interval(cpu, d, false);
                let next = &mut self.cpus[cpu].next_balance[d];
                *next = (*next).min(idle_next);
            }
        }
        // NI_RANDOM (newidle.rs) throws its die only where the kernel would balance at all:
        // the root domain overloaded (`get_rd_overloaded`: some CPU with a task waiting)
        let dice = self.newidle.is_some() && (0..self.ncpus()).any(|c| c != cpu && self.nr_movable(c) > 0);
        for d in 0..self.topo.domains[cpu].len() {
            let weight = match self.newidle.as_mut() {
                Some(ni) if dice => {
                    let Some(w) = ni.throw(cpu, d) else { continue }; // the die skipped it
                    Some(w)
                }
                _ => None,
            };
            let pulled = self.newidle_pull(cpu, d, cache_hot);
            if let (Some(w), Some(ni)) = (weight, self.newidle.as_mut()) {
                ni.ran(cpu, d, w, pulled);
            }
            if pulled {
                return true;
            }
        }
        false
    }

    /// The CPUs of `span` but `cpu` with tasks that could move, the most first (ties by id).
    fn busiest_first(&self, cpu: CpuId, span: &[CpuId]) -> Vec<CpuId> {
        let mut srcs: Vec<CpuId> = span
            .iter()
            .copied()
            .filter(|&c| c != cpu && self.nr_movable(c) > 0)
            .collect();
        srcs.sort_by_key(|&c| (std::cmp::Reverse(self.nr_movable(c)), c));
        srcs
    }

    /// One domain's newly-idle pull: the first task it may take, busiest CPU first.
    fn newidle_pull(&mut self, cpu: CpuId, d: usize, cache_hot: bool) -> bool {
        let level = self.topo.domains[cpu][d].level;
        let failed = self.cpus[cpu].nr_balance_failed[d];
        let span = self.topo.domains[cpu][d].span.clone();
        for src in self.busiest_first(cpu, &span) {
            let cold = self
                .movable(src, cpu)
                .filter(|&t| !cache_hot || !self.held_hot(t, cpu, level, failed))
                .min_by_key(|&t| self.pull_order(t, cpu));
            if let Some(t) = cold {
                self.move_task(t, cpu);
                return true;
            }
        }
        false
    }

    /// `cpu` has tasks waiting (checked when one is queued and at its scheduler ticks): if some
    /// CPU is idle, kick a NOHZ idle balance at the next tick (`nohz_balancer_kick`).
    /// Also kick when an idle CPU's balance is due and this LLC has several busy CPUs
    /// (`nohz_balancer_kick`: nr_busy_cpus > 1), so idle cores can spread them.
    pub(crate) fn maybe_kick_idle(&mut self, cpu: CpuId) {
        if self.idle_kick_pending || self.nr_idle_cpus == 0 {
            return;
        }
        if self.nr_movable(cpu) == 0 && !(self.now >= self.nohz_next_balance && self.llc_busy_spread(cpu)) {
            return;
        }
        self.idle_kick_pending = true;
        let tick = self.tun.tick_ns;
        let at = (self.now / tick + 1) * tick;
        self.queue.push(at, Event::IdleKick);
    }

    /// The NOHZ balancer runs for every idle CPU: each pulls work if there is any.
    /// Then each idle CPU whose domains are due balances them by group types (lb_groups.rs),
    /// and `nohz.next_balance` becomes the earliest next balance of an idle CPU.
    pub(crate) fn nohz_idle_balance(&mut self) {
        let mut next = Ns::MAX;
        for cpu in 0..self.ncpus() {
            if self.cpus[cpu].curr.is_none() {
                self.schedule(cpu);
            }
            if self.cpus[cpu].curr.is_none() {
                self.idle_cpu_rebalance(cpu);
                next = next.min(self.cpus[cpu].next_balance.iter().copied().min().unwrap_or(Ns::MAX));
            }
        }
        self.nohz_next_balance = next;
    }

    /// `get_sd_balance_interval`: span-weight ms, ×busy_factor (16) when the CPU is busy
    /// (running non-idle work), capped at max_load_balance_interval = HZ × ncpus / 10 jiffies.
    pub(crate) fn balance_interval(&self, cpu: CpuId, d: usize) -> Ns {
        self.sd_balance_interval(cpu, d, !self.idle_for_wake(cpu))
    }

    /// `get_sd_balance_interval(sd, busy)` of `cpu`'s domain `d`.
    fn sd_balance_interval(&self, cpu: CpuId, d: usize, busy: bool) -> Ns {
        let span = self.topo.domains[cpu][d].span.len() as u64;
        let ms = if busy { span * 16 } else { span };
        let cap_ms = (self.ncpus() as u64 * 100).max(1);
        (ms.min(cap_ms)).max(1) * 1_000_000
    }

    /// Make sure a busy CPU has its periodic balance pending (idle CPUs stop their tick).
    pub(crate) fn arm_balance(&mut self, cpu: CpuId) {
        if self.cpus[cpu].balance_armed || self.topo.domains[cpu].is_empty() {
            return;
        }
        for d in 0..self.topo.domains[cpu].len() {
            if self.cpus[cpu].next_balance[d] <= self.now {
                self.cpus[cpu].next_balance[d] = self.now + self.balance_interval(cpu, d);
            }
        }
        let at = self.cpus[cpu].next_balance.iter().copied().min().unwrap();
        let c = &mut self.cpus[cpu];
        c.balance_armed = true;
        c.balance_gen += 1;
        let gen = c.balance_gen;
        self.queue.push(at, Event::Balance { cpu, gen });
    }

    /// The CPU just became "SCHED_IDLE only": the kernel pulls its next balance in to now
    /// (`dequeue_task_fair`: rq->next_balance = jiffies), so it runs at the next tick.
    pub(crate) fn balance_at_next_tick(&mut self, cpu: CpuId) {
        if self.topo.domains[cpu].is_empty() {
            return;
        }
        let tick = self.tun.tick_ns;
        let at = (self.now / tick + 1) * tick;
        for d in 0..self.topo.domains[cpu].len() {
            self.cpus[cpu].next_balance[d] = self.cpus[cpu].next_balance[d].min(at);
        }
        let c = &mut self.cpus[cpu];
        c.balance_armed = true;
        c.balance_gen += 1;
        let gen = c.balance_gen;
        self.queue.push(at, Event::Balance { cpu, gen });
    }

    pub(crate) fn periodic_balance(&mut self, cpu: CpuId) {
        self.update_blocked_averages(cpu);
        for d in 0..self.topo.domains[cpu].len() {
            if self.now >= self.cpus[cpu].next_balance[d] {
                if self.should_we_balance(cpu, d) {
                    self.load_balance(cpu, d);
                }
                self.cpus[cpu].last_balance[d] = self.now;
                self.cpus[cpu].next_balance[d] = self.now + self.balance_interval(cpu, d);
            }
        }
        if self.cpus[cpu].curr.is_some() {
            self.arm_balance(cpu);
            // trigger_load_balance → nohz_balancer_kick from the busy CPU's tick (the model
            // has no tick for a lone task, its balance event stands in)
            self.maybe_kick_idle(cpu);
        }
    }

    /// `sched_balance_update_blocked_averages` (PELT shares only): the balance softirq first
    /// decays this CPU's queues' averages, publishing them into their groups' load_avg; and,
    /// at most every LOAD_AVG_PERIOD ms, a busy CPU's tick has the NOHZ balancer do the same
    /// for the idle CPUs (NOHZ_STATS_KICK, `nohz.next_blocked`), whose averages would
    /// otherwise stay as they were when they went idle.
    fn update_blocked_averages(&mut self, cpu: CpuId) {
        if !self.tun.pelt_shares {
            return;
        }
        let ncpus = self.ncpus();
        let stats_kick = self.now >= self.next_blocked;
        if stats_kick {
            self.next_blocked = self.now + crate::pelt::LOAD_AVG_PERIOD as u64 * 1_000_000;
        }
        for c in 0..ncpus {
            if c == cpu || (stats_kick && self.cpus[c].curr.is_none()) {
                for cg in 1..self.cgroups.len() {
                    self.update_load_avg(cg * ncpus + c);
                }
            }
        }
    }

    /// `should_we_balance`: one CPU per local group balances a domain — its first idle CPU,
    /// else its first CPU.
    pub(crate) fn should_we_balance(&self, cpu: CpuId, d: usize) -> bool {
        let dom = &self.topo.domains[cpu][d];
        let group = &dom.groups[dom.local_group];
        let chosen = group
            .iter()
            .copied()
            .find(|&c| self.idle_for_wake(c))
            .unwrap_or(group[0]);
        chosen == cpu
    }

    /// A task's PELT load average now (`se->avg.load_avg`, decayed lazily: its weight while
    /// queued, nothing while asleep, since the last update).
    pub(crate) fn task_load_avg(&self, t: TaskId) -> u64 {
        let se = self.tasks[t].se;
        self.ses[se].avg.load_avg_at(self.now, self.avg_input(se))
    }

    /// Invariant (for tests): a task's PELT average is never above the weight it accumulates
    /// at (it is a weighted mean of weight and 0) — but for the slop of the divider, which
    /// counts the current period's part as if whole (`get_pelt_divider`): at most 1024 units
    /// of 46 718, 1/45 — and never updated past now.
    pub(crate) fn check_task_avgs(&self) -> Result<(), String> {
        // A top-level group entity's running average never exceeds its runnable one (it runs
        // only while queued; moves take running time out with the runnable, update_tg_cfs_load
        // keeps at least the running time), but for the divider's slop; neither is ahead of now.
        for (i, s) in self.ses.iter().enumerate() {
            if matches!(s.kind, crate::cfs_rq::SeKind::Task(_)) || !self.keeps_averages(i) {
                continue;
            }
            let (u, l) = (
                s.util.load_avg_at(self.now, self.util_input(i)),
                s.avg.load_avg_at(self.now, self.avg_input(i)),
            );
            if u > l + l / 45 + 2 || s.util.last_update_time > self.now || s.avg.last_update_time > self.now {
                return Err(format!(
                    "group entity {i}: running {:?} above runnable {:?} at {}",
                    s.util, s.avg, self.now
                ));
            }
        }
        for (t, task) in self.tasks.iter().enumerate() {
            let s = &self.ses[task.se];
            let most = s.weight + s.weight / 45;
            if s.avg.load_avg > most || s.avg.last_update_time > self.now || self.task_load_avg(t) > most {
                return Err(format!(
                    "task {t}: PELT {:?} against weight {} at {}",
                    s.avg, s.weight, self.now
                ));
            }
        }
        Ok(())
    }

    /// `task_h_load` on the task's own CPU.
    pub(crate) fn task_h_load(&self, t: TaskId) -> f64 {
        self.task_h_load_on(t, self.tasks[t].cpu)
    }

    /// `task_h_load` (fair.c): the task's load_avg × h_load(its cfs_rq) / (that cfs_rq's
    /// load_avg plus 1), where `update_cfs_rq_h_load` sets h_load top-down from the root's
    /// load_avg: h_load(child) = h_load(parent) × gse.load_avg / (parent load_avg plus 1). At
    /// the root the ratio is load_avg / (load_avg plus 1), about 1; each group level
    /// multiplies by the group entity's weight over its own queue's load. Model reduction:
    /// group entities and queues keep no per-entity average, so those group-level ratios are
    /// instantaneous weights (what their averages converge to under steady load); the task's
    /// own load is PELT. On a CPU where the task is not queued (a wakee on prev, a task being
    /// moved away) its weight, and that of any group entity of its path not queued there,
    /// counts as added.
    pub(crate) fn task_h_load_on(&self, t: TaskId, cpu: CpuId) -> f64 {
        let se = self.tasks[t].se;
        let mut rq = self.tasks[t].cg * self.ncpus() + cpu;
        let (mut child, mut added) = (
            self.ses[se].weight,
            !(self.ses[se].on_rq && self.ses[se].parent_rq == rq),
        );
        let mut ratio = 1.0f64;
        while let Some(g) = self.rqs[rq].gse {
            let load = self.rqs[rq].load + if added { child } else { 0 };
            ratio *= self.ses[g].weight as f64 / load.max(1) as f64;
            (child, added, rq) = (self.ses[g].weight, !self.ses[g].on_rq, self.ses[g].parent_rq);
        }
        self.task_load_avg(t) as f64 * ratio
    }

    /// `load_balance`: a CPU with nothing but idle-class work pulls a waiting task from the
    /// busiest CPU of the domain (`sched_idle_cpu` balancing); otherwise the group-typed
    /// balancer of lb_groups.rs decides what moves.
    fn load_balance(&mut self, cpu: CpuId, d: usize) {
        self.update_idle_cpu_scan(cpu, d); // update_sd_lb_stats (sis_util.rs)
        if self.idle_for_wake(cpu) {
            let span = self.topo.domains[cpu][d].span.clone();
            for src in self.busiest_first(cpu, &span) {
                if let Some(t) = self.pick_movable(src, cpu).filter(|&t| !self.tasks[t].idle_policy) {
                    self.migrate_task(t, cpu);
                    return;
                }
            }
        }
        self.lb_groups_balance(cpu, d);
    }
}

#[cfg(test)]
mod tests {
    //! `wake_affine_idle` and `wake_affine_weight` worked by hand as fair.c (6.18) has them.
    use super::*;
    use serde_json::json;

    /// scale_load(1024): a nice-0 task's weight, and a 1024-share group's whole on one CPU.
    const NICE_0: f64 = 1024.0 * 1024.0;

    /// 2 CPUs, one LLC: `pinned` = [(cgroup, cpu.shares, CPU, hogs)], and a sleeping task in
    /// group `w` (its one request served at t = 0, then a think of 1000 s) last run on CPU 1.
    fn node(pinned: &[(&str, u64, u32, u32)], features: serde_json::Value) -> (Node, TaskId) {
        let mut cgroups = vec![json!({"name": "w"})];
        let mut workloads = vec![
            json!({"kind": "closed_loop", "name": "svc", "cgroup": "w", "clients": 1,
            "service": {"dist": "constant", "value_ns": 1}, "think": {"dist": "constant", "value_ns": 1_000_000_000_000u64}}),
        ];
        for &(name, shares, cpu, hogs) in pinned {
            cgroups.push(json!({"name": name, "cpu.shares": shares, "cpuset.cpus": cpu.to_string()}));
            workloads.push(json!({"kind": "hog", "name": format!("h{name}"), "cgroup": name, "threads": hogs}));
        }
        let spec = json!({"topology": {"cores_per_socket": 2},
            "kernel": {"scheduler": "eevdf", "version": "6.18.44", "sched_features": features},
            "cgroups": cgroups, "workloads": workloads});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        // long enough for a delayed dequeue (DELAY_DEQUEUE) of the sleeper to have ended
        n.run_until(200_000_000).unwrap();
        let t = n.tasks.iter().position(|t| t.wl == 0).unwrap();
        assert_eq!(n.tasks[t].state, TaskState::Sleeping);
        assert!(!n.ses[n.tasks[t].se].on_rq);
        n.tasks[t].cpu = 1;
        (n, t)
    }

    fn hog(n: &Node, wl: usize) -> TaskId {
        n.tasks.iter().position(|t| t.wl == wl).unwrap()
    }

    fn load(n: &Node, cpu: CpuId) -> f64 {
        n.rqs[n.root_rq(cpu)].load as f64
    }

    /// Set PELT averages by hand, as if brought to date just now: every CPU's `cpu_load` to
    /// its queue's weight (what steady running converges to: the root's tasks at their
    /// weight, each queued group entity always runnable), or task `t`'s own
    /// (`se->avg.load_avg`).
    fn settle_cpu_avgs(n: &mut Node) {
        for c in 0..n.ncpus() {
            let rq = n.root_rq(c);
            let tasks = n.rqs[rq].load - n.rqs[rq].group_load;
            n.rqs[rq].avg = crate::pelt::Avg::runnable_from(n.now, tasks);
            for cg in 1..n.cgroups.len() {
                if let Some(g) = n.rqs[cg * n.ncpus() + c].gse.filter(|&g| n.ses[g].parent_rq == rq) {
                    let runnable = if n.ses[g].on_rq { crate::pelt::RUNNABLE_UNIT } else { 0 };
                    n.ses[g].avg = crate::pelt::Avg::runnable_from(n.now, runnable);
                }
            }
            assert_eq!(n.cpu_load(c), n.rqs[rq].load);
        }
    }

    fn set_task_avg(n: &mut Node, t: TaskId, load_avg: f64) {
        let se = n.tasks[t].se;
        n.ses[se].avg = crate::pelt::Avg::runnable_from(n.now, load_avg as u64);
    }

    /// `select_idle_sibling` as it was before `LlcIdle`: both scans over the whole LLC.
    fn scanning_select(n: &Node, t: TaskId, target: CpuId) -> CpuId {
        let ok = |c: CpuId| n.allowed(t, c);
        if ok(target) && n.idle_for_wake(target) {
            return target;
        }
        let llc = &n.topo.socket_cpus[n.topo.socket_of[target]];
        let start = llc.iter().position(|&c| c == target).unwrap();
        let from_next = (1..llc.len()).map(|i| llc[(start + i) % llc.len()]);
        let idle_core = |c: CpuId| n.topo.siblings(c).iter().all(|&s| n.truly_idle(s));
        from_next
            .clone()
            .find(|&c| ok(c) && idle_core(c))
            .or_else(|| from_next.clone().find(|&c| ok(c) && n.idle_for_wake(c)))
            .unwrap_or_else(|| {
                if ok(target) {
                    target
                } else {
                    n.select_idle_sibling(t, target, target)
                }
            })
    }

    #[test]
    fn llc_idle_counts_stay_exact_and_place_wakeups_as_the_full_scan_does() {
        // 2 LLCs of 4 SMT cores: a bursty service, idle-class hogs (idle for placement but
        // not truly idle), throttled hogs (bandwidth dequeues) and a pinned group.
        let spec = json!({"seed": 7,
            "topology": {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 2},
            "cgroups": [{"name": "ls"}, {"name": "be", "cpu.idle": 1},
                        {"name": "q", "cpu.cfs_quota_us": 1_300_000, "cpu.cfs_period_us": 100_000},
                        {"name": "pin", "cpuset.cpus": "9-11"}],
            "workloads": [
                {"kind": "open_loop", "name": "web", "cgroup": "ls", "rate_per_s": 3000.0, "workers": 12,
                 "service": {"dist": "exponential", "mean_ns": 1e6}},
                {"kind": "hog", "name": "b", "cgroup": "be", "threads": 3},
                {"kind": "hog", "name": "q", "cgroup": "q", "threads": 14},
                {"kind": "closed_loop", "name": "p", "cgroup": "pin", "clients": 3,
                 "service": {"dist": "exponential", "mean_ns": 2e5},
                 "think": {"dist": "exponential", "mean_ns": 5e5}}]});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        let (mut none_idle, mut some_idle, mut compared) = (0, 0, 0);
        for step in 1..=2000u64 {
            n.run_until(step * 250_000).unwrap();
            n.check_invariants().unwrap(); // the counts against a recount
            for l in &n.llc_idle {
                if l.for_wake == 0 {
                    none_idle += 1;
                } else {
                    some_idle += 1;
                }
            }
            for t in 0..n.tasks.len() {
                if n.tasks[t].state != TaskState::Sleeping {
                    continue;
                }
                for cpu in 0..n.ncpus() {
                    assert_eq!(n.select_idle_sibling(t, cpu, cpu), scanning_select(&n, t, cpu));
                    compared += 1;
                }
            }
        }
        // both branches were taken, often (the group-type balancer keeps the LLCs busier: ~100 of 4,000)
        assert!(none_idle > 50 && some_idle > 50, "{none_idle} {some_idle}");
        assert!(compared > 10_000);
    }

    #[test]
    fn wake_affine_idle_takes_an_idle_waker_cpu_a_lone_sync_waker_or_an_idle_prev() {
        // CPU 0 idle, CPU 1 busy: an idle waking CPU in prev's LLC takes the wakee (an
        // interrupt woke it); with prev idle too, prev keeps it
        let (n, _) = node(&[("b", 1024, 1, 1)], json!({}));
        assert_eq!(n.wake_affine_idle(0, 1, false), Some(0));
        let (n, _) = node(&[], json!({}));
        assert_eq!(n.wake_affine_idle(0, 1, false), Some(1));
        // CPU 0 runs only the waker: a sync wakeup is handed over; a plain one, with prev
        // busy, gets no answer (then the weights decide); with prev idle, prev
        let (n, _) = node(&[("a", 1024, 0, 1), ("b", 1024, 1, 1)], json!({}));
        assert_eq!(n.wake_affine_idle(0, 1, true), Some(0));
        assert_eq!(n.wake_affine_idle(0, 1, false), None);
        let (n, _) = node(&[("a", 1024, 0, 1)], json!({}));
        assert_eq!(n.wake_affine_idle(0, 1, false), Some(1));
        // two tasks on CPU 0: the sync waker is not alone, prev busy: no answer
        let (n, _) = node(&[("a", 1024, 0, 2), ("b", 1024, 1, 1)], json!({}));
        assert_eq!(n.wake_affine_idle(0, 1, true), None);
    }

    #[test]
    fn wake_affine_weight_favours_prev_by_half_the_imbalance_pct() {
        // Each CPU runs one pinned group, all its load there: its entity weighs its whole
        // shares (calc_group_shares), so CPU 0 weighs a·1024 and CPU 1 b·1024 = 4·NICE_0; the
        // averages are set to these (what 200 ms of running converges to, ±1.3%). The sleeping
        // wakee is alone in its 1024-share group: h_load ratio on prev 1 (its group entity
        // over its own weight), so task_h_load = its load_avg, tl. Not sync, CPU 0 wins iff
        // (L0 + tl)·100 < (L1 − tl)·(100 + (117 − 100)/2) = (L1 − tl)·108. In NICE_0 units,
        // with tl = 1 (a wakee that ran all the time): (a/1024 + 1)·100 < 324: a < 2293.8.
        // With tl = 1/8 (it ran an eighth of the time): (a/1024 + 1/8)·100 < 3.875·108 =
        // 418.5: a < 4157.4 — a sleeper is pulled to a waker's CPU its full weight would not.
        for (a, tl, bias, expect) in [
            (2048, 1.0, true, true),    // 300 < 324: the waker's CPU ...
            (2048, 1.0, false, false),  // ... which without WA_BIAS (300 < 300) is not better than prev
            (2290, 1.0, true, true),    // 323.6 < 324
            (2300, 1.0, true, false),   // 324.6: prev
            (2300, 0.125, true, true),  // 237.1 < 418.5
            (4150, 0.125, true, true),  // 417.8 < 418.5
            (4170, 0.125, true, false), // 419.7: prev
        ] {
            let (mut n, t) = node(&[("a", a, 0, 1), ("b", 4096, 1, 1)], json!({"WA_BIAS": bias}));
            assert_eq!((load(&n, 0), load(&n, 1)), (a as f64 * 1024.0, 4.0 * NICE_0));
            settle_cpu_avgs(&mut n);
            set_task_avg(&mut n, t, tl * NICE_0);
            assert_eq!(n.task_h_load_on(t, 1), tl * NICE_0);
            let w = Waker {
                cpu: 0,
                task: hog(&n, 1),
                sync: false,
            };
            assert_eq!(
                n.wake_affine_weight(t, w, 1, 117),
                expect.then_some(0),
                "a = {a}, tl {tl}, bias {bias}"
            );
        }
    }

    #[test]
    fn a_sync_wakers_own_load_does_not_count_against_its_cpu() {
        // CPU 0 ten times heavier than a nice-0 task, but all of it is the waker's: its group
        // entity weighs 10·NICE_0 over its queue's NICE_0, so with its own load_avg NICE_0 its
        // h_load is 10·NICE_0 = L0, not more: this_eff = (L0 − L0 + NICE_0)·100 = 100 units
        // against prev's (4 − 1)·108 + 1 = 324: the waker's CPU. Not sync, (10 + 1)·100 = 1100:
        // prev. A waker that has run half the time (load_avg NICE_0/2, h_load 5) leaves
        // (10 − 5 + 1)·100 = 600 > 324: prev.
        let (mut n, t) = node(&[("a", 10240, 0, 1), ("b", 4096, 1, 1)], json!({}));
        let waker = hog(&n, 1);
        settle_cpu_avgs(&mut n);
        set_task_avg(&mut n, t, NICE_0);
        set_task_avg(&mut n, waker, NICE_0);
        assert_eq!(n.task_h_load(waker), load(&n, 0));
        for (sync, expect) in [(true, Some(0)), (false, None)] {
            let w = Waker {
                cpu: 0,
                task: waker,
                sync,
            };
            assert_eq!(n.wake_affine_weight(t, w, 1, 117), expect);
        }
        // through wake_affine: with WA_IDLE the lone sync waker already decides it
        let w = Waker {
            cpu: 0,
            task: waker,
            sync: true,
        };
        assert_eq!(n.wake_affine(t, w, 1), 0);
        assert_eq!(n.wake_affine(t, Waker { sync: false, ..w }, 1), 1);
        set_task_avg(&mut n, waker, NICE_0 / 2.0);
        assert_eq!(n.task_h_load(waker), 5.0 * NICE_0);
        assert_eq!(n.wake_affine_weight(t, w, 1, 117), None);
    }

    #[test]
    fn task_h_load_is_the_tasks_average_times_its_groups_ratio() {
        // One CPU: group "g" (1024 shares) runs 3 hogs, root runs 1. The group's entity weighs
        // its whole 1024 shares (all its load is here): NICE_0, over its queue's 3·NICE_0, so
        // a hog in it with load_avg 0.6·NICE_0 has task_h_load 0.6/3 = 0.2·NICE_0 — fair.c's
        // load_avg × h_load(g) / (g load_avg + 1) with h_load(g) = NICE_0 (the root at 2·NICE_0
        // × gse NICE_0 / 2·NICE_0) and g's load_avg 3·NICE_0: 629145 × 1048576 / 3145729 =
        // 209714.9, the model's 209715 up to the kernel's +1s. The root hog's ratio is 1.
        let spec = json!({"topology": {"cores_per_socket": 1},
            "cgroups": [{"name": "g"}],
            "workloads": [{"kind": "hog", "name": "g", "cgroup": "g", "threads": 3},
                          {"kind": "hog", "name": "r", "cgroup": "", "threads": 1}]});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(50_000_000).unwrap();
        let (g, r) = (hog(&n, 0), hog(&n, 1));
        assert_eq!(load(&n, 0), 2.0 * NICE_0);
        set_task_avg(&mut n, g, 0.6 * NICE_0);
        set_task_avg(&mut n, r, 0.75 * NICE_0);
        assert!((n.task_h_load(g) - 0.2 * NICE_0).abs() < 1.0, "{}", n.task_h_load(g));
        assert_eq!(n.task_h_load(r), 0.75 * NICE_0);
        // Unset, a hog's own average is its weight (it has been queued since it was forked,
        // where it started at its weight), up to the sum's truncation
        let g2 = n.tasks.iter().rposition(|t| t.wl == 0).unwrap();
        assert!(
            n.task_load_avg(g2).abs_diff(NICE_0 as u64) <= 2,
            "{}",
            n.task_load_avg(g2)
        );
    }

    #[test]
    fn record_wakee_counts_switches_and_halves_once_a_second() {
        // HZ 250 (4 ms jiffies): a waker alternating between two wakees flips at every
        // switch, not at a repeat; past ts + HZ it halves once (3 → 1, then the switch: 2),
        // and once only after a long quiet spell (j = 1000, 3 s on: 2 → 1, +1 = 2).
        let mut w = Wakee::default();
        for (wakee, jiffies, flips, ts) in [
            (7, 0, 1, 0),
            (7, 10, 1, 0),
            (8, 20, 2, 0),
            (7, 250, 3, 0), // 250 > 0 + 250 is false: time_after is strict
            (8, 251, 2, 251),
            (9, 1000, 2, 1000),
            (9, 1001, 2, 1000),
        ] {
            w.record(wakee, jiffies, 250);
            assert_eq!((w.flips, w.decay_ts, w.last), (flips, ts, Some(wakee)), "at {jiffies}");
        }
    }

    #[test]
    fn wake_wide_needs_both_flip_counts_over_the_llc_size_and_a_factor_apart() {
        // sd_llc_size 16: slave = the smaller count must reach 16 and master 16 × slave.
        for (waker, wakee, wide) in [
            (1000, 15, false), // a 1:N dispatcher waking a wakee that flips less than 16
            (256, 16, true),   // 256 ≥ 16·16
            (255, 16, false),
            (16, 300, true), // the roles swap: the wakee is the many-waker
            (40, 40, false), // M:M within the factor
            (0, 0, false),
        ] {
            assert_eq!(wake_wide(waker, wakee, 16), wide, "{waker} {wakee}");
        }
        // a 1-CPU LLC: anything that flips at all is wide against a waker flipping as often
        assert!(wake_wide(1, 1, 1));
    }

    #[test]
    fn a_waker_of_many_is_not_pulled_from_once_flips_make_it_wide() {
        // The lone sync waker on CPU 0 (hog "a") would take the wakee (wake_affine_idle, see
        // above) while prev, CPU 1, runs hog "b". The LLC has 2 CPUs, so the factor is 2. The
        // wakee flipped twice itself (it woke others); the waker's flips come from the wakeups
        // through select_task_rq: it alternates between the wakee and another task.
        let (mut n, t) = node(&[("a", 1024, 0, 1), ("b", 1024, 1, 1)], json!({}));
        let (waker, other) = (hog(&n, 1), hog(&n, 2));
        // "b" unpinned, so that waking its hog counts (see the end)
        let b = n.tasks[other].cg;
        n.cgroups[b].cpus = vec![true; 2];
        n.tasks[t].wakee.flips = 2;
        n.waker = Some(Waker {
            cpu: 0,
            task: waker,
            sync: true,
        });
        // 1st wakeup: the waker flips once; slave = min(1, 2) = 1 < 2: affine, CPU 0
        assert_eq!(n.select_task_rq(t, 1), 0);
        assert_eq!(n.tasks[waker].wakee.flips, 1);
        // the same wakee again: no flip, still affine
        assert_eq!(n.select_task_rq(t, 1), 0);
        assert_eq!(n.tasks[waker].wakee.flips, 1);
        // other, then t: 3 flips, slave 2, master 3 < 2·2: affine
        n.select_task_rq(other, 1);
        assert_eq!(n.select_task_rq(t, 1), 0);
        assert_eq!(n.tasks[waker].wakee.flips, 3);
        // other, then t: 5 flips ≥ 4 and slave 2 ≥ 2: wide, the wakee stays on prev
        n.select_task_rq(other, 1);
        assert_eq!(n.select_task_rq(t, 1), 1);
        assert_eq!(n.tasks[waker].wakee.flips, 5);
        // more than a second on (HZ 250 by default: 250 jiffies), the first record halves
        // the waker's flips to 2, the switch makes 3 < 4: affine again
        n.now += 1_010_000_000;
        n.select_task_rq(other, 1);
        assert_eq!(n.tasks[waker].wakee.flips, 3);
        assert_eq!(n.select_task_rq(t, 1), 1); // 4 ≥ 4: wide again
        assert_eq!(n.tasks[waker].wakee.flips, 4);
        // a wakee pinned to one CPU is no flip (core.c calls select_task_rq_fair only for
        // nr_cpus_allowed > 1): "b"'s hog waking "a"'s, pinned to CPU 0
        n.waker = Some(Waker {
            task: other,
            ..n.waker.unwrap()
        });
        n.select_task_rq(waker, 0);
        assert_eq!(n.tasks[other].wakee, Wakee::default());
        n.select_task_rq(t, 1);
        assert_eq!(n.tasks[other].wakee.flips, 1);
    }

    #[test]
    fn a_dispatcher_whose_wakees_do_not_flip_is_never_wide() {
        // One client with a generator task (0.1 ms of CPU per request) fanning each request
        // out to 3 server threads (1 ms each), think 0, 2 LLCs of 4 CPUs. The generator wakes
        // the 3 threads in turn, 3 flips a request, ~900 requests a second: its flips run
        // into the thousands. Each thread only ever wakes the generator (when it is the last
        // of the three to finish): 1 flip the first time, halved to 0 at its first wakeup
        // more than a second on, and no flip after (the same wakee): 0 or 1. So the smaller
        // count is below sd_llc_size = 4 and the 1:N relation is not wide (fair.c: wake_wide
        // asks for M:N — partners that flip too).
        let spec = json!({"topology": {"sockets": 2, "cores_per_socket": 4},
            "kernel": {"scheduler": "eevdf", "version": "6.18"},
            "cgroups": [{"name": "w"}],
            "workloads": [{"kind": "closed_loop", "name": "q", "cgroup": "w", "clients": 1, "fanout": 3,
                "service": {"dist": "constant", "value_ns": 1_000_000},
                "client_cpu": {"dist": "constant", "value_ns": 100_000},
                "think": {"dist": "constant", "value_ns": 0}}]});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(3_000_000_000).unwrap();
        let mut flips: Vec<u32> = n.tasks.iter().map(|t| t.wakee.flips).collect();
        flips.sort_unstable();
        assert_eq!(flips.len(), 4);
        assert!(flips[..3].iter().all(|&f| f <= 1), "{flips:?}");
        assert!(flips[3] > 1000, "{flips:?}");
        assert!(flips[..3].iter().all(|&f| !wake_wide(flips[3], f, 4)));
    }

    #[test]
    fn without_a_release_or_with_the_switches_off_the_wakee_stays_near_prev() {
        let (n, t) = node(
            &[("a", 1024, 0, 1), ("b", 1024, 1, 1)],
            json!({"WA_IDLE": false, "WA_WEIGHT": false}),
        );
        let w = Waker {
            cpu: 0,
            task: hog(&n, 1),
            sync: true,
        };
        assert_eq!(n.wake_affine(t, w, 1), 1);
    }

    /// Two hogs pinned to CPU 1 (2 CPUs, HZ 250), then allowed both CPUs: CPU 0 is idle beside
    /// the one that waits. `can_migrate_task` (fair.c 6.18): the waiting hog stays while
    /// `now − exec_start < sysctl_sched_migration_cost` (0.5 ms) — exec_start being when it
    /// stopped running — unless the domain failed more than cache_nice_tries (MC: 1) periodic
    /// balances; without an explicit release the model's older pull takes it at once.
    fn hogs_on_cpu1(version: Option<&str>) -> (Node, TaskId) {
        let mut spec = json!({"topology": {"cores_per_socket": 2},
            "cgroups": [{"name": "h", "cpuset.cpus": "1"}],
            "workloads": [{"kind": "hog", "name": "h", "cgroup": "h", "threads": 2}]});
        if let Some(v) = version {
            spec["kernel"] = json!({"scheduler": "eevdf", "version": v});
        }
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        // to a tick (4 ms): the hogs' slices end at ticks, so one just stopped
        n.run_until(52_000_000).unwrap();
        n.write("h", "cpuset.cpus", "0-1").unwrap();
        let waiting = (0..2).find(|&t| n.tasks[t].state == TaskState::Runnable).unwrap();
        assert_eq!(n.tasks[waiting].cpu, 1);
        assert!(n.cpus[0].curr.is_none());
        (n, waiting)
    }

    #[test]
    fn a_newly_idle_cpu_leaves_a_cache_hot_task_where_it_is() {
        let (mut n, t) = hogs_on_cpu1(Some("6.18"));
        let stopped = n.tasks[t].exec_start;
        assert!(stopped > 0 && n.now - stopped < 499_999, "{stopped} {}", n.now);
        // 0.5 ms less 1 ns after it stopped: hot, it stays (the clock only moves on)
        n.now = stopped + 499_999;
        assert!(!n.newidle_balance(0));
        assert_eq!(n.tasks[t].cpu, 1);
        // the domain's periodic balances failed twice (> cache_nice_tries): hot or not, it goes
        n.cpus[0].nr_balance_failed[0] = 2;
        assert!(n.newidle_balance(0));
        assert_eq!(n.tasks[t].cpu, 0);
        // 0.5 ms after it stopped it is cold: pulled with no failure counted
        let (mut n, t) = hogs_on_cpu1(Some("6.18"));
        n.now = n.tasks[t].exec_start + 500_000;
        assert!(n.newidle_balance(0));
        assert_eq!(n.tasks[t].cpu, 0);
        // the model's older placement (no explicit release) pulls it however hot
        let (mut n, t) = hogs_on_cpu1(None);
        n.tasks[t].exec_start = n.now; // (as if it had just stopped)
        assert!(n.newidle_balance(0));
        assert_eq!(n.tasks[t].cpu, 0);
    }

    #[test]
    fn going_idle_brings_the_next_balance_in_to_the_idle_interval() {
        // sched_balance_newidle's update_next_balance (busy = 0): last_balance + span (2) ms,
        // instead of the busy CPU's span × busy_factor (32 ms)
        let (mut n, t) = hogs_on_cpu1(Some("6.18"));
        assert!(n.now - n.tasks[t].exec_start < 500_000); // hot: nothing is pulled
        n.cpus[0].last_balance[0] = n.now - 1_000_000;
        n.cpus[0].next_balance[0] = n.now + 31_000_000;
        assert!(!n.newidle_balance(0));
        assert_eq!(n.cpus[0].next_balance[0], n.now + 1_000_000);
    }
}
