//! The node's memory wired to its tasks: a task's allocation is charged to its cgroup's
//! memcg (memcg.rs) before the work that follows it; what the charge costs becomes that
//! task's CPU work (reclaim), a sleep (memory.high), or its death and others' (OOM). A
//! "process" for the OOM killer is a task: a `stress --vm` worker is a process of its own.

use crate::cgroup::CgId;
use crate::error::{Result, SpecError};
use crate::events::Event;
use crate::memcg::{Charge, Memory, Watermarks, UNLIMITED};
use crate::node::{Node, TaskState};
use crate::spec::NodeSpec;
use crate::workload::{CacheOp, Effects, TaskId};

/// Per charging task: (task, extra CPU work in ns, sleep in ns before it).
pub type Costs = Vec<(TaskId, u64, u64)>;

fn limit(v: i64) -> u64 {
    if v < 0 {
        UNLIMITED
    } else {
        v as u64
    }
}

fn shown(v: u64) -> i64 {
    if v == UNLIMITED {
        -1
    } else {
        v as i64
    }
}

/// memory.pressure FULL of one cgroup: it holds while a task of the subtree is stalled and
/// none is runnable; called whenever either count changes.
pub(crate) fn update_full(cg: &mut crate::cgroup::Cgroup, now: u64) {
    let full = cg.memstall > 0 && cg.nr_runnable == 0;
    match (full, cg.memfull_since) {
        (true, None) => cg.memfull_since = Some(now),
        (false, Some(since)) => {
            cg.mem_psi.total[1] += now - since;
            cg.memfull_since = None;
        }
        _ => {}
    }
}

impl Node {
    pub(crate) fn init_memory(&mut self, spec: &NodeSpec) {
        let Some(ms) = &spec.memory else { return };
        let parents: Vec<Option<usize>> = self.cgroups.iter().map(|g| g.parent).collect();
        let mut m = Memory::new(&parents, ms.total_bytes, ms.swap_bytes, ms.reclaim_ns_per_page);
        m.watermarks = Watermarks::for_total(ms.total_bytes, ms.watermark_scale_factor);
        for (i, c) in spec.cgroups.iter().enumerate() {
            let g = &mut m.cgs[i + 1];
            g.max = limit(c.memory_max);
            g.high = limit(c.memory_high);
            g.low = c.memory_low as u64;
            g.min = c.memory_min as u64;
            g.oom_group = c.memory_oom_group == 1;
        }
        // cgroup v1's memory controller with a disk to write back to: limit reclaim waits on
        // writeback (mm/vmscan.c `writeback_throttling_sane` is false for legacy memcg
        // reclaim); v2 is left as it was (dirty pages are not tracked there yet)
        if spec.kernel.memcg_v1 {
            if let Some(d) = &spec.disk {
                m.cache.legacy = Some(crate::lru::LegacyWait::new(crate::disk::Disk::writeback_ns_per_byte(d)));
            }
        }
        self.memory = Some(m);
    }

    /// Charge (or free) what the workloads asked; kill what the OOM killer chose. Page
    /// cache objects are touched (mark_page_accessed) or charged and put on the LRU.
    pub(crate) fn apply_charges(&mut self, eff: &mut Effects) -> Costs {
        let mut costs = Costs::new();
        if eff.charges.is_empty() && eff.cache.is_empty() {
            return costs;
        }
        let mut killed_any = false;
        // what a reclaimer throttled on writeback now waits for: the disk's chunk in flight
        let now = self.now;
        if let (Some(m), Some(d)) = (self.memory.as_mut(), self.disk.as_ref()) {
            if let Some(l) = m.cache.legacy.as_mut() {
                l.in_flight = d.writeback_due(now);
            }
        }
        let charges = std::mem::take(&mut eff.charges)
            .into_iter()
            .map(|(t, k, b)| (t, Ok((k, b))));
        let objects = std::mem::take(&mut eff.cache).into_iter().map(|(t, o)| (t, Err(o)));
        for (t, what) in charges.chain(objects) {
            if self.tasks[t].dead {
                continue;
            }
            let cg = self.tasks[t].cg;
            let Some(m) = self.memory.as_mut() else { continue };
            let c: Charge = match what {
                Ok((kind, bytes)) if bytes < 0 => {
                    m.uncharge(cg, t, kind, bytes.unsigned_abs());
                    continue;
                }
                Ok((kind, bytes)) => m.charge(cg, t, kind, bytes as u64),
                Err(CacheOp::Touch(s, i)) => {
                    m.cache.touch(s, i);
                    continue;
                }
                Err(CacheOp::Fill(s, i, accessed)) => {
                    let c = m.charge_object(cg, t, s, i, accessed);
                    // a write (not marked accessed: FGP_WRITEBEGIN) dirties the object; its
                    // writeback domain is its cgroup's with cgroup writeback, else the root's
                    if !accessed && m.cache.legacy.is_some() && !c.failed && !c.killed.contains(&t) {
                        let per_cg = self.disk.as_ref().is_some_and(|d| d.cgroup_writeback);
                        let domain = crate::lru::writeback_domain(per_cg, cg);
                        let bytes = m.cache.bytes_of(s, i);
                        m.cache.dirty(domain, Some((s, i)), bytes);
                    }
                    c
                }
            };
            let mut victims = c.killed.clone();
            if c.failed && !victims.contains(&t) {
                victims.push(t);
            }
            for v in victims {
                killed_any |= self.oom_kill_task(v);
            }
            if !self.tasks[t].dead {
                costs.push((t, c.reclaim_ns, c.throttle_ns));
            }
        }
        if self
            .memory
            .as_mut()
            .is_some_and(|m| std::mem::take(&mut m.cache.kick_flusher))
        {
            self.wake_flushers();
        }
        if killed_any {
            for cpu in 0..self.ncpus() {
                self.unthrottle_qos(cpu);
                self.schedule(cpu);
            }
        }
        costs
    }

    /// The OOM killer's victim dies (its memory was already released by memcg).
    fn oom_kill_task(&mut self, t: TaskId) -> bool {
        if self.tasks[t].dead {
            return false;
        }
        let wl = self.tasks[t].wl;
        self.oom_kills[wl] += 1;
        self.take_off(t);
        if self.tasks.iter().filter(|x| x.wl == wl).all(|x| x.dead) {
            self.killed[wl] = true;
        }
        true
    }

    /// The work after a charge is set: add what the charge cost. True when the task now
    /// sleeps (memory.high) instead of going on; it resumes by itself.
    pub(crate) fn after_charge(&mut self, t: TaskId, costs: &mut Costs) -> bool {
        let Some(i) = costs.iter().position(|c| c.0 == t) else {
            return false;
        };
        let (_, extra, delay) = costs.swap_remove(i);
        self.tasks[t].remaining += extra;
        if extra > 0 {
            self.reclaim_stall(t, extra);
        }
        if delay > 0 {
            self.memstall(t, true);
        }
        match self.tasks[t].state {
            TaskState::Running => {
                let cpu = self.tasks[t].cpu;
                if delay > 0 {
                    self.dequeue_task(t, true);
                    self.tasks[t].state = TaskState::Sleeping;
                    self.schedule(cpu);
                    self.queue.push(self.now + delay, Event::Resume { task: t });
                    return true;
                }
                self.reprogram(cpu);
                false
            }
            TaskState::Runnable if delay > 0 => {
                // preempted at the tick that came with its allocation: it sleeps from the queue
                self.dequeue_task(t, true);
                self.tasks[t].state = TaskState::Sleeping;
                self.queue.push(self.now + delay, Event::Resume { task: t });
                true
            }
            _ if delay > 0 => {
                self.queue.push(self.now + delay, Event::Resume { task: t });
                true
            }
            _ => false,
        }
    }

    /// A trace player moves a workload's memory from `held` to `want` bytes (charged to
    /// `owner`): the difference is allocated or freed at once; reclaim and OOM happen as for
    /// any charge (their CPU cost is not put on a task: the player is not one).
    pub(crate) fn follow_memory(&mut self, owner: TaskId, held: u64, want: u64) -> Result<()> {
        if self.tasks[owner].dead {
            return Ok(());
        }
        let cg = self.tasks[owner].cg;
        let m = self.memory_mut("memory_bytes")?;
        if want < held {
            m.uncharge(cg, owner, crate::memcg::Kind::Anon, held - want);
            return Ok(());
        }
        let c = m.charge(cg, owner, crate::memcg::Kind::Anon, want - held);
        let mut victims = c.killed.clone();
        if c.failed && !victims.contains(&owner) {
            victims.push(owner);
        }
        if !victims.is_empty() {
            self.settle();
            for v in victims {
                self.oom_kill_task(v);
            }
            for cpu in 0..self.ncpus() {
                self.unthrottle_qos(cpu);
                self.schedule(cpu);
            }
        }
        Ok(())
    }

    /// What a workload sees of memory before it is called: a file server, its cgroup's cache.
    pub(crate) fn refresh_view(&mut self, wl: usize) {
        match (&mut self.workloads[wl], &self.memory) {
            (crate::workload::Workload::FileServer(f), Some(m)) => {
                f.cached = m.cgs[f.cg].file;
                // its files' residency, copied only when its cgroup's lists changed
                if let Some(s) = f.space {
                    let epoch = m.cache.epoch(f.cg);
                    if f.seen_epoch != Some(epoch) {
                        m.cache.resident(s, &mut f.resident);
                        f.seen_epoch = Some(epoch);
                    }
                }
            }
            (crate::workload::Workload::Analytics(a), Some(m)) => {
                // of what each worker has loaded, the share no longer resident (swapped out)
                for (k, &t) in a.threads.iter().enumerate() {
                    let rss = m.rss.get(&(a.cg, t)).copied().unwrap_or(0);
                    a.swapped[k] = if a.loaded[k] == 0 {
                        0.0
                    } else {
                        1.0 - (rss.min(a.loaded[k]) as f64 / a.loaded[k] as f64)
                    };
                }
            }
            (crate::workload::Workload::ClosedLoop(cl), _) if cl.cross.is_some() => {
                let tasks = &self.tasks;
                if let Some(x) = cl.cross.as_mut() {
                    x.cpu_of.clear();
                    x.cpu_of
                        .extend(cl.threads.iter().chain(&cl.generator).map(|&t| tasks[t].cpu));
                }
            }
            _ => {}
        }
    }

    /// A task enters or leaves a memory stall (memory.pressure SOME of every cgroup above it).
    pub(crate) fn memstall(&mut self, t: TaskId, on: bool) {
        if self.tasks[t].memstall == on {
            return;
        }
        self.tasks[t].memstall = on;
        let mut g = Some(self.tasks[t].cg);
        while let Some(c) = g {
            let cg = &mut self.cgroups[c];
            if on {
                if cg.memstall == 0 {
                    cg.memstall_since = self.now;
                }
                cg.memstall += 1;
            } else {
                cg.memstall -= 1;
                if cg.memstall == 0 {
                    cg.mem_psi.total[0] += self.now - cg.memstall_since;
                }
            }
            update_full(cg, self.now);
            g = cg.parent;
        }
    }

    /// Direct reclaim is a memory stall too; counted as it is charged (where no stall is
    /// already being timed), since the task spends it as CPU work right after.
    fn reclaim_stall(&mut self, t: TaskId, ns: u64) {
        let mut g = Some(self.tasks[t].cg);
        while let Some(c) = g {
            if self.cgroups[c].memstall == 0 {
                self.cgroups[c].mem_psi.total[0] += ns;
            }
            g = self.cgroups[c].parent;
        }
    }

    /// Bring the open stall intervals' time into the totals (before reading them).
    pub(crate) fn fold_memstall(&mut self) {
        let now = self.now;
        for cg in &mut self.cgroups {
            if cg.memstall > 0 {
                cg.mem_psi.total[0] += now - cg.memstall_since;
                cg.memstall_since = now;
            }
            if let Some(since) = cg.memfull_since {
                cg.mem_psi.total[1] += now - since;
                cg.memfull_since = Some(now);
            }
        }
    }

    pub(crate) fn resume(&mut self, t: TaskId) {
        self.memstall(t, false);
        if self.tasks[t].dead || self.killed[self.tasks[t].wl] {
            return;
        }
        match self.tasks[t].state {
            TaskState::New => self.wake_up_new(t),
            TaskState::Sleeping => self.try_to_wake_up(t),
            _ => {}
        }
    }

    fn memory_mut(&mut self, knob: &str) -> Result<&mut Memory> {
        self.memory
            .as_mut()
            .ok_or_else(|| SpecError::new(knob, "memory is not modelled on this node (give the node's memory)"))
    }

    /// memory.limit_in_bytes / memory.high / memory.low / memory.min / memory.oom.group.
    /// Lowering a limit below the usage reclaims at once and, for memory.max, OOM-kills
    /// until the group fits (`memory_max_write`); memory.high only reclaims
    /// (`memory_high_write`).
    pub(crate) fn write_memory_knob(&mut self, cg: CgId, knob: &str, value: i64) -> Result<()> {
        let (alinux, openeuler) = (self.tun.alinux_memcg, self.tun.openeuler_memcg);
        let m = self.memory_mut(knob)?;
        let mut ch = Charge::default();
        match knob {
            "memory.limit_in_bytes" => {
                m.cgs[cg].max = limit(value);
                while m.cgs[cg].usage > m.cgs[cg].max {
                    let need = m.cgs[cg].usage - m.cgs[cg].max;
                    if m.reclaim(cg, need, &mut ch, false) >= need {
                        break;
                    }
                    let max = m.cgs[cg].max;
                    m.cgs[cg].events.oom += 1;
                    if !m.oom_kill(cg, max, &mut ch) {
                        break;
                    }
                }
            }
            "memory.high" => {
                m.cgs[cg].high = limit(value);
                if m.cgs[cg].usage > m.cgs[cg].high {
                    let need = m.cgs[cg].usage - m.cgs[cg].high;
                    m.reclaim(cg, need, &mut ch, false);
                }
            }
            "memory.low" => m.cgs[cg].low = value as u64,
            "memory.min" => m.cgs[cg].min = value as u64,
            "memory.oom.group" => m.cgs[cg].oom_group = value == 1,
            "memory.wmark_ratio"
            | "memory.wmark_scale_factor"
            | "memory.wmark_min_adj"
            | "memory.priority"
            | "memory.use_priority_oom"
                if !alinux =>
            {
                return Err(SpecError::new(
                    knob,
                    "this kernel has no such file (an Alibaba Cloud Linux memcg extension: kernel.alinux_memcg)",
                ));
            }
            "memory.high_async_ratio" if !openeuler => {
                return Err(SpecError::new(
                    knob,
                    "this kernel has no such file (an openEuler memcg extension: kernel.openeuler_memcg)",
                ));
            }
            "memory.wmark_ratio" => m.cgs[cg].wmark_ratio = value as u64,
            "memory.wmark_scale_factor" => m.cgs[cg].wmark_scale_factor = value as u64,
            "memory.wmark_min_adj" => m.cgs[cg].wmark_min_adj = value,
            "memory.priority" => m.cgs[cg].priority = value as u64,
            "memory.use_priority_oom" => m.cgs[cg].use_priority_oom = value == 1,
            "memory.high_async_ratio" => m.cgs[cg].high_async_ratio = value as u64,
            _ => {
                return Err(SpecError::new(
                    knob,
                    format!("unknown knob {knob:?} (known: {})", crate::spec::KNOBS.join(", ")),
                ))
            }
        }
        if !ch.killed.is_empty() {
            for v in ch.killed {
                self.oom_kill_task(v);
            }
            for cpu in 0..self.ncpus() {
                self.unthrottle_qos(cpu);
                self.schedule(cpu);
            }
        }
        Ok(())
    }

    pub(crate) fn read_memory_knob(&self, cg: CgId, knob: &str) -> Result<i64> {
        let m = self
            .memory
            .as_ref()
            .ok_or_else(|| SpecError::new(knob, "memory is not modelled on this node (give the node's memory)"))?;
        let g = &m.cgs[cg];
        Ok(match knob {
            "memory.limit_in_bytes" => shown(g.max),
            "memory.high" => shown(g.high),
            "memory.low" => g.low as i64,
            "memory.min" => g.min as i64,
            "memory.oom.group" => g.oom_group as i64,
            "memory.usage_in_bytes" => g.usage as i64,
            "memory.max_usage_in_bytes" => g.peak as i64,
            "memory.wmark_ratio" => g.wmark_ratio as i64,
            "memory.wmark_scale_factor" => g.wmark_scale_factor as i64,
            // reads show the effective value (wmark_min_eadj), as the kernel's file does
            "memory.wmark_min_adj" => m.wmark_min_eadj(cg),
            "memory.priority" => g.priority as i64,
            "memory.use_priority_oom" => g.use_priority_oom as i64,
            "memory.high_async_ratio" => g.high_async_ratio as i64,
            _ => {
                return Err(SpecError::new(
                    knob,
                    format!("unknown knob {knob:?} (known: {})", crate::spec::KNOBS.join(", ")),
                ))
            }
        })
    }
}
