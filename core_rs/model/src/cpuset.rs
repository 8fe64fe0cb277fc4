//! cpusets (cgroup v1 `cpuset.cpus` / `cpuset.mems`, kernel-and-anchors.md §A9): the CPUs a
//! cgroup's tasks may run on and the NUMA nodes their memory may come from. Placement,
//! wakeups and balancing only ever choose allowed CPUs; shrinking a cpuset at run time moves
//! the tasks off the CPUs it lost, as the kernel's `set_cpus_allowed_ptr` does.
//!
//! v1 rules: a cgroup's set is a subset of its parent's, and a parent may not drop CPUs or
//! nodes a child still has. Unlike a fresh v1 cgroup (whose cpuset.cpus starts empty), a
//! simulated cgroup starts with its parent's sets, so scenarios need not spell them out.

use crate::cgroup::CgId;
use crate::error::{Result, SpecError};
use crate::node::{Node, TaskState};
use crate::topology::CpuId;
use crate::workload::TaskId;

/// Parse a kernel cpu/node list ("0-3,6,8-9") into a membership mask of `n` entries.
pub fn parse_list(field: &str, text: &str, n: usize, what: &str) -> Result<Vec<bool>> {
    let mut mask = vec![false; n];
    let text = text.trim();
    if text.is_empty() {
        return Ok(mask);
    }
    for part in text.split(',') {
        let part = part.trim();
        let bad = || {
            SpecError::new(
                field,
                format!("{part:?} is not a {what} or a range like 0-3 (in {text:?})"),
            )
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<usize>().map_err(|_| bad())?,
                b.trim().parse::<usize>().map_err(|_| bad())?,
            ),
            None => {
                let v = part.parse::<usize>().map_err(|_| bad())?;
                (v, v)
            }
        };
        if lo > hi || hi >= n {
            return Err(SpecError::new(
                field,
                format!("{part:?}: {what}s are 0..{} here (in {text:?})", n - 1),
            ));
        }
        for m in &mut mask[lo..=hi] {
            *m = true;
        }
    }
    Ok(mask)
}

/// The kernel's list format of a mask: "0-3,6".
pub fn format_list(mask: &[bool]) -> String {
    let mut out: Vec<String> = vec![];
    let mut i = 0;
    while i < mask.len() {
        if mask[i] {
            let start = i;
            while i + 1 < mask.len() && mask[i + 1] {
                i += 1;
            }
            out.push(if start == i {
                format!("{i}")
            } else {
                format!("{start}-{i}")
            });
        }
        i += 1;
    }
    out.join(",")
}

fn subset(a: &[bool], b: &[bool]) -> bool {
    a.iter().zip(b).all(|(&x, &y)| !x || y)
}

impl Node {
    #[inline]
    pub(crate) fn allowed(&self, t: TaskId, cpu: CpuId) -> bool {
        self.cgroups[self.tasks[t].cg].cpus[cpu]
    }

    /// Set a cgroup's masks while the node is built, parents first: each starts from its
    /// parent's and must stay within it (children are configured after it, from it).
    pub(crate) fn init_cpuset(&mut self, cg: CgId, cpus: Option<&str>, mems: Option<&str>) -> Result<()> {
        let p = self.cgroups[cg].parent.expect("not the root");
        let name = self.cgroups[cg].name.clone();
        for (knob, text, n, what) in [
            ("cpuset.cpus", cpus, self.ncpus(), "CPU"),
            ("cpuset.mems", mems, self.topo.nnodes, "NUMA node"),
        ] {
            let parent = if knob == "cpuset.cpus" {
                &self.cgroups[p].cpus
            } else {
                &self.cgroups[p].mems
            };
            let mask = match text {
                None => parent.clone(),
                Some(t) => parse_list(&format!("cgroups.{name}.{knob}"), t, n, what)?,
            };
            if !subset(&mask, parent) {
                return Err(SpecError::new(
                    format!("cgroups.{name}.{knob}"),
                    format!(
                        "{} is not within the parent's {}",
                        format_list(&mask),
                        format_list(parent)
                    ),
                ));
            }
            if knob == "cpuset.cpus" {
                self.cgroups[cg].cpus = mask;
            } else {
                self.cgroups[cg].mems = mask;
            }
        }
        Ok(())
    }

    /// Check a new cpuset.cpus / cpuset.mems mask against the v1 hierarchy rules.
    fn check_cpuset(&self, cg: CgId, knob: &str, mask: &[bool], pick: impl Fn(CgId) -> Vec<bool>) -> Result<()> {
        let field = format!("cgroups.{}.{knob}", self.cgroups[cg].name);
        if !mask.iter().any(|&m| m) && self.cgroups[cg].nr_tasks > 0 {
            return Err(SpecError::new(field, "must not be empty while the cgroup has tasks"));
        }
        if let Some(p) = self.cgroups[cg].parent {
            let pm = pick(p);
            if !subset(mask, &pm) {
                return Err(SpecError::new(
                    field,
                    format!("{} is not within the parent's {}", format_list(mask), format_list(&pm)),
                ));
            }
        }
        for &c in &self.cgroups[cg].children {
            let cm = pick(c);
            if !subset(&cm, mask) {
                let child = &self.cgroups[c].name;
                return Err(SpecError::new(
                    field,
                    format!("child {child:?} still has {}; shrink the child first", format_list(&cm)),
                ));
            }
        }
        Ok(())
    }

    /// Write cpuset.cpus: the tasks of the cgroup on CPUs it lost move to allowed ones
    /// (`set_cpus_allowed_ptr` → `__migrate_task`).
    pub(crate) fn set_cpuset_cpus(&mut self, cg: CgId, text: &str) -> Result<()> {
        let field = format!("cgroups.{}.cpuset.cpus", self.cgroups[cg].name);
        let mask = parse_list(&field, text, self.ncpus(), "CPU")?;
        self.check_cpuset(cg, "cpuset.cpus", &mask, |g| self.cgroups[g].cpus.clone())?;
        self.settle();
        self.cgroups[cg].cpus = mask;
        // A delayed sleeper on a CPU it lost leaves that queue now: it would wake there.
        for t in 0..self.tasks.len() {
            if self.tasks[t].cg == cg && self.task_delayed(t) && !self.allowed(t, self.tasks[t].cpu) {
                self.finish_delayed_task(t);
            }
        }
        let stranded: Vec<TaskId> = (0..self.tasks.len())
            .filter(|&t| {
                let task = &self.tasks[t];
                task.cg == cg
                    && matches!(task.state, TaskState::Runnable | TaskState::Running)
                    && !self.allowed(t, task.cpu)
            })
            .collect();
        // Stop the stranded running tasks first, so that no CPU picks a stranded waiter in
        // between; then move them all and let the CPUs they left pick again.
        for &t in &stranded {
            if self.tasks[t].state == TaskState::Running {
                self.preempt_off_cpu(self.tasks[t].cpu);
            }
        }
        let mut left: Vec<CpuId> = vec![];
        for &t in &stranded {
            // Stopping one may have let its SMT sibling pick another stranded task again (the
            // expeller releases the sibling): stop that one now.
            if self.tasks[t].state == TaskState::Running {
                self.preempt_off_cpu(self.tasks[t].cpu);
            }
            let src = self.tasks[t].cpu;
            let dst = self.select_task_rq(t, src);
            self.dequeue_task(t, false);
            self.enqueue_task(t, dst, crate::cfs::Enqueue::Migrate);
            if !left.contains(&src) {
                left.push(src);
            }
        }
        for src in left {
            self.schedule(src);
        }
        for &t in &stranded {
            if self.tasks[t].state == TaskState::Runnable {
                self.check_preempt_curr(self.tasks[t].cpu, t);
            }
        }
        // CPUs the set gained may be idle while its tasks wait elsewhere.
        for cpu in 0..self.ncpus() {
            self.maybe_kick_idle(cpu);
        }
        Ok(())
    }

    /// Write cpuset.mems: where the tasks' memory may live (their NUMA home node).
    pub(crate) fn set_cpuset_mems(&mut self, cg: CgId, text: &str) -> Result<()> {
        let field = format!("cgroups.{}.cpuset.mems", self.cgroups[cg].name);
        let mask = parse_list(&field, text, self.topo.nnodes, "NUMA node")?;
        self.check_cpuset(cg, "cpuset.mems", &mask, |g| self.cgroups[g].mems.clone())?;
        self.settle();
        self.cgroups[cg].mems = mask;
        // Memory follows the new mems (the kernel migrates pages when memory_migrate is set;
        // without it, new allocations land there): re-home tasks whose node is not allowed.
        for t in 0..self.tasks.len() {
            if self.tasks[t].cg == cg {
                if let Some(h) = self.tasks[t].home_node {
                    if !self.cgroups[cg].mems[h] {
                        self.tasks[t].home_node = None;
                    }
                }
            }
        }
        for cpu in 0..self.ncpus() {
            self.refresh_speed(cpu);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip() {
        let m = parse_list("f", "0-3, 6,8-9", 12, "CPU").unwrap();
        assert_eq!(format_list(&m), "0-3,6,8-9");
        assert_eq!(format_list(&parse_list("f", "", 4, "CPU").unwrap()), "");
        assert!(parse_list("f", "2-1", 4, "CPU").is_err());
        assert!(parse_list("f", "0-4", 4, "CPU")
            .unwrap_err()
            .to_string()
            .contains("0..3"));
        assert!(parse_list("f", "x", 4, "CPU").is_err());
    }
}
