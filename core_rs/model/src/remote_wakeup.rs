//! A wakeup across CPUs costs CPU on both ends.
//!
//! `try_to_wake_up` of a task placed on another CPU than its waker's queues it there
//! (`ttwu_queue_wakelist`) and interrupts that CPU (`send_call_function_single_ipi`, or
//! `resched_curr`'s reschedule IPI). In a virtual machine without posted interrupts both ends
//! leave the guest: the waker to send, the wakee's CPU to take the interrupt and run it. What
//! it costs is a property of the host, and on this one it is large: redis-server pinned apart
//! from redis-benchmark spends 2.3 µs a GET plus 23.5 µs a wakeup, the benchmark ~14 µs more
//! per wakeup of the server (docs/replay.md, "A wakeup across CPUs"), while a wakeup on the
//! same CPU costs well under a microsecond. So a server woken for every request pays the
//! price every request, and one that finds a batch waiting pays it once for the batch: how
//! often it sleeps, which a hog in its gaps changes, decides its CPU per request.
//!
//! Model: a wakeup with a waker on another CPU than the one the wakee is placed on adds
//! `wakee` to the wakee's work, and `waker` to the waker's — at once if it runs on, else when
//! it is next woken (a waker that blocks right after, as a pipe writer then reading). Wakeups
//! without a task waker (timers, IO completions) cost nothing here.

use serde::Deserialize;

use crate::node::Node;
use crate::topology::CpuId;
use crate::workload::{TaskId, FOREVER};

/// `[node.remote_wakeup]`: the CPU a wakeup across CPUs costs each end.
#[derive(Debug, Clone, Copy, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RemoteWakeupSpec {
    /// Added to the woken task's work.
    #[serde(default)]
    pub wakee_ns: u64,
    /// Added to the waking task's work.
    #[serde(default)]
    pub waker_ns: u64,
}

impl Node {
    /// Task `t`, just placed on `cpu` by a wakeup: if its waker runs on another CPU, both pay.
    /// (Called only with `[node.remote_wakeup]`: without it nothing is owed.)
    pub(crate) fn charge_remote_wakeup(&mut self, t: TaskId, cpu: CpuId) {
        let owed = std::mem::take(&mut self.tasks[t].owed);
        if self.tasks[t].remaining != FOREVER {
            self.tasks[t].remaining += owed;
        }
        let (Some(cost), Some(w)) = (self.remote_wakeup, self.waker) else {
            return;
        };
        if w.cpu == cpu || w.task == t {
            return;
        }
        if self.tasks[t].remaining != FOREVER {
            self.tasks[t].remaining += cost.wakee_ns;
        }
        if cost.waker_ns == 0 || self.tasks[w.task].remaining == FOREVER {
            return;
        }
        if self.cpus[w.cpu].curr == Some(w.task) && !self.cpus[w.cpu].blocking {
            // it runs on: its work grows now, and its CPU's next event with it
            self.update_curr(w.cpu);
            self.tasks[w.task].remaining += cost.waker_ns;
            self.reprogram(w.cpu);
        } else {
            self.tasks[w.task].owed += cost.waker_ns;
        }
    }
}
