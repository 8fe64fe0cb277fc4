//! Steal: the hypervisor takes a running vCPU away for a while.
//!
//! A guest's vCPU is a thread on the host, scheduled with the host's other work. A vCPU that
//! halts often gives its physical CPU up in its gaps, and the host's work runs there; one
//! that runs without a halt for long is preempted by it instead, and the guest stops dead
//! for as long as that work runs — tens of µs to several ms on the host measured here, where
//! a spinner on each of the two CPUs loses 2–4 gaps a second over 100 µs (up to 6 ms) but a
//! spinner that halts every 200 µs none (docs/replay.md, "The hypervisor's stalls"). So a service beside a hog
//! that keeps the CPUs from halting is stalled where alone it was not, and a stalled CPU's
//! wakeups wait: what a wrk-style client, which counts the requests a stall held up, sees in
//! its tail.
//!
//! The stolen time is not charged to the task that was running: a guest with steal time
//! (`paravirt_steal_clock`, /proc/stat's steal) subtracts it from the run queue's task clock
//! (`update_rq_clock_task`), so its vruntime, sum_exec_runtime and quota do not move.
//!
//! Model: stalls arrive on each CPU at `rate` a second (Poisson; one stream per node). One
//! that arrives while the CPU runs something, and has run it without going idle for at least
//! `after`, stalls the CPU for a drawn `length`: its task makes no progress and is charged
//! nothing, its ticks stop, and a schedule asked of it (a wakeup's preemption, a slice's end)
//! waits for the stall to end. Others arrive in vain (an idle vCPU had its gap; a stalled one
//! is already stalled). Other CPUs may still pull its waiting tasks.

use serde::Deserialize;

use crate::dist::Dist;
use crate::error::{Result, SpecError};
use crate::events::{Event, Ns};
use crate::node::Node;
use crate::rng::Rng;
use crate::topology::CpuId;

/// `[node.steal]`: how often, and for how long, the host takes a busy vCPU away.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StealSpec {
    /// Stalls a second on each CPU (of those that land on a CPU running for `after`).
    pub rate_per_s: f64,
    /// How long a stall lasts.
    pub length: Dist,
    /// How long a CPU must have run without going idle before a stall can strike it.
    #[serde(default)]
    pub after_ns: Ns,
}

impl StealSpec {
    pub fn validate(&self, field: &str) -> Result<()> {
        if !(self.rate_per_s.is_finite() && self.rate_per_s > 0.0) {
            return Err(SpecError::new(
                format!("{field}.rate"),
                format!("must be a positive number of stalls a second (got {})", self.rate_per_s),
            ));
        }
        self.length.validate(&format!("{field}.length"))
    }
}

/// The stream of stalls and each CPU's part in it.
pub struct Steal {
    mean_gap_ns: f64,
    length: Dist,
    after: Ns,
    rng: Rng,
    /// Since when each CPU has run without going idle (None: idle).
    busy_since: Vec<Option<Ns>>,
    /// A schedule asked of a stalled CPU, done when the stall ends.
    deferred: Vec<bool>,
}

/// The random stream of stalls: apart from the node's, the workloads', the idle exits' and
/// the worker pools' owners (node.rs POOL_OWNERS_STREAM, 1 << 41 + pool index).
const STREAM: u64 = 1 << 42;

impl Steal {
    pub fn new(spec: &StealSpec, seed: u64, ncpus: usize) -> Steal {
        Steal {
            mean_gap_ns: 1e9 / spec.rate_per_s,
            length: spec.length.clone(),
            after: spec.after_ns,
            rng: Rng::stream(seed, STREAM),
            busy_since: vec![None; ncpus],
            deferred: vec![false; ncpus],
        }
    }

    fn next_gap(&mut self) -> Ns {
        (self.rng.exponential(self.mean_gap_ns).ceil() as Ns).max(1)
    }
}

impl Node {
    /// The first stall of every CPU (at the node's start).
    pub(crate) fn start_steal(&mut self) {
        for cpu in 0..self.ncpus() {
            let Some(s) = self.steal.as_mut() else { return };
            let at = self.now + s.next_gap();
            self.queue.push(at, Event::Stall { cpu });
        }
    }

    /// A CPU started (`busy`) or stopped running: the time a stall needs it to have run.
    pub(crate) fn steal_busy_changed(&mut self, cpu: CpuId, busy: bool) {
        if let Some(s) = self.steal.as_mut() {
            s.busy_since[cpu] = busy.then_some(self.now);
        }
    }

    /// A schedule asked of a stalled CPU: done when the stall ends.
    pub(crate) fn defer_schedule_to_stall_end(&mut self, cpu: CpuId) {
        if let Some(s) = self.steal.as_mut() {
            s.deferred[cpu] = true;
        }
    }

    /// A stall arrives at `cpu`: it strikes if the CPU has run for `after`; the next is drawn.
    pub(crate) fn stall(&mut self, cpu: CpuId) {
        let Some(s) = self.steal.as_mut() else { return };
        let next = self.now + s.next_gap();
        self.queue.push(next, Event::Stall { cpu });
        let strikes = !self.cpus[cpu].stalled
            && self.cpus[cpu].curr.is_some()
            && s.busy_since[cpu].is_some_and(|since| self.now - since >= s.after);
        if !strikes {
            return;
        }
        let length = s.length.sample(&mut s.rng);
        self.update_curr(cpu);
        self.cpus[cpu].stalled = true;
        self.queue.push(self.now + length, Event::StallEnd { cpu });
        self.reprogram(cpu);
    }

    /// The stall of `cpu` ends: the time it took is nobody's, and a schedule it held back is
    /// done now.
    pub(crate) fn stall_end(&mut self, cpu: CpuId) {
        self.cpus[cpu].stalled = false;
        self.cpus[cpu].clock = self.now;
        let deferred = self
            .steal
            .as_mut()
            .is_some_and(|s| std::mem::take(&mut s.deferred[cpu]));
        if deferred {
            self.schedule(cpu);
        } else {
            self.reprogram(cpu);
        }
    }
}
