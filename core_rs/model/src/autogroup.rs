//! Autogroup (kernel/sched/autogroup.c, CONFIG_SCHED_AUTOGROUP): with
//! kernel.sched_autogroup_enabled = 1 a task of the root task group is scheduled in the task
//! group of its session (`autogroup_task_group`: only when the task's group is
//! `root_task_group`; a task in any cpu cgroup keeps its cgroup). Each autogroup is a child
//! of the root beside the root's cgroups (`autogroup_create` → `sched_create_group(&root_task_group)`),
//! weighing its nice's `sched_prio_to_weight` (`proc_sched_autogroup_set_nice`): 1024 at nice 0,
//! the default of every new autogroup.
//!
//! In the model an autogroup is an implicit cgroup below the root, appended after the
//! scenario's cgroups: invisible to policies (no name resolves to it) and to the reported
//! cgroup list, its CPU counted to the root as the root's cpuacct counts it (its tasks are in
//! the root cgroup as cgroupfs sees them).

use crate::error::{Result, SpecError};
use crate::spec::NodeSpec;

/// cpu.shares of an autogroup at nice 0: sched_prio_to_weight[20] (kernel/sched/core.c).
pub const AUTOGROUP_SHARES: u64 = 1024;

/// The name the model gives an autogroup: /proc/PID/autogroup shows "/autogroup-<id>"; a
/// leading "/" keeps it apart from every scenario cgroup path.
pub fn group_name(session: &str) -> String {
    format!("/autogroup-{session}")
}

/// Each workload's session when autogroup applies to it (on, and the workload is in the root
/// cgroup), in workload order; None for the others. A workload is its own session unless
/// `autogroup_sessions` names one (setsid() per process, as replay starts each program).
pub fn sessions(spec: &NodeSpec) -> Vec<Option<String>> {
    spec.workloads
        .iter()
        .map(|w| {
            (spec.kernel.autogroup && w.cgroup().is_empty()).then(|| {
                spec.kernel
                    .autogroup_sessions
                    .get(w.name())
                    .cloned()
                    .unwrap_or_else(|| w.name().to_string())
            })
        })
        .collect()
}

/// Every session the spec gives names a workload of the root cgroup.
pub fn check_sessions(spec: &NodeSpec) -> Result<()> {
    for (name, session) in &spec.kernel.autogroup_sessions {
        let field = format!("kernel.autogroup_sessions.{name}");
        match spec.workloads.iter().find(|w| w.name() == name) {
            None => return Err(SpecError::new(field, "no workload of that name")),
            Some(w) if !w.cgroup().is_empty() => {
                return Err(SpecError::new(
                    field,
                    format!(
                        "workload {name:?} is in cgroup {:?}; a session's autogroup applies only to the root cgroup's tasks",
                        w.cgroup()
                    ),
                ))
            }
            Some(_) if session.is_empty() => return Err(SpecError::new(field, "an empty session name")),
            Some(_) => {}
        }
    }
    Ok(())
}
