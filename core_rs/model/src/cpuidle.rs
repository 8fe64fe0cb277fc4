//! cpuidle: a CPU with nothing to run enters an idle state, and a wakeup of it waits the
//! state's exit latency before the CPU runs anything.
//!
//! The kernel's idle loop (`do_idle` → `cpuidle_idle_call`) puts a CPU with an empty queue
//! into the state its governor picks; each state has an `exit_latency`
//! (`struct cpuidle_state`, /sys/devices/system/cpu/cpuN/cpuidle/stateK/latency). A wakeup
//! that targets such a CPU (`try_to_wake_up` → `ttwu_queue_wakelist` / `resched_curr` → an
//! IPI) is served only once it is out of that state. In a virtual machine the idle state is a
//! halt (`cpuidle-haltpoll` with `guest_halt_poll_ns = 0` polls never): the vCPU leaves the
//! guest, and the wakeup waits for the hypervisor to run it again — tens of µs, with a long
//! tail, against ~1 µs for a wakeup of a CPU that is running something (a SCHED_IDLE hog
//! keeps it out of idle). The latency is a property of the host, measured by a probe
//! (replay/cpuidle.py), not fitted to a service.
//!
//! Model: a CPU that schedules and finds nothing becomes `Halted`. The next `schedule` of a
//! halted CPU with something queued does not pick: the CPU is `Exiting` until a drawn exit
//! latency has passed (its CPU event), and then schedules. The longer a halt has lasted, the
//! deeper the state it ends in may be (`deeper`, each with its `target_residency`): the
//! kernel's governors (menu, teo) enter the deepest state whose `target_residency` the
//! predicted idle covers; the model picks by the idle that happened (a governor that predicts
//! right), which is what a guest's halt does on the host measured here — its exit grows with
//! the halt's length (5–9 µs after 30 µs, 10–16 after 1 ms, 56–58 after 30 ms: docs/replay.md,
//! "An idle exit grows with the halt"). Wakeups and pulls onto an exiting
//! CPU queue behind the same exit. A CPU that goes idle balances first (`newidle_balance`,
//! before it halts), so work it pulls then runs at once.

use serde::Deserialize;

use crate::dist::Dist;
use crate::error::{Result, SpecError};
use crate::events::Ns;
use crate::node::Node;
use crate::rng::Rng;
use crate::topology::CpuId;

/// `[node.cpuidle]`: the idle state a CPU with nothing to run enters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuidleSpec {
    /// How long a wakeup of an idle CPU waits before the CPU runs (drawn per exit), after a
    /// halt shorter than every deeper state's residency.
    pub exit_latency: Dist,
    /// Deeper states, by increasing `target_residency`: a halt that has lasted at least that
    /// long exits with the state's latency.
    #[serde(default)]
    pub deeper: Vec<DeeperState>,
}

/// One deeper idle state (`struct cpuidle_state`: `target_residency`, `exit_latency`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeeperState {
    pub target_residency_ns: Ns,
    pub exit_latency: Dist,
}

impl CpuidleSpec {
    pub fn validate(&self, field: &str) -> Result<()> {
        self.exit_latency.validate(&format!("{field}.exit_latency"))?;
        let mut last: Ns = 0;
        for (i, d) in self.deeper.iter().enumerate() {
            let at = format!("{field}.deeper[{i}]");
            if d.target_residency_ns <= last {
                return Err(SpecError::new(
                    format!("{at}.target_residency"),
                    format!(
                        "must be above the state before it ({} ns; the first deeper state's above 0), got {} ns",
                        last, d.target_residency_ns
                    ),
                ));
            }
            last = d.target_residency_ns;
            d.exit_latency.validate(&format!("{at}.exit_latency"))?;
        }
        Ok(())
    }
}

/// Where a CPU is in and out of its idle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleState {
    /// Running something, or idle without an idle state (no `[node.cpuidle]`).
    Awake,
    /// In its idle state since this time: the next wakeup waits an exit latency (the deeper
    /// the longer it has lasted).
    Halted(Ns),
    /// Leaving its idle state: it schedules at this time.
    Exiting(Ns),
}

/// The node's idle state and the stream its exit latencies are drawn from.
pub struct Cpuidle {
    exit_latency: Dist,
    deeper: Vec<DeeperState>,
    rng: Rng,
}

/// The random stream of exit latencies: apart from the node's own (0) and the workloads'
/// (1..), so turning cpuidle on does not move any workload's draws.
const STREAM: u64 = 1 << 40;

impl Cpuidle {
    pub fn new(spec: &CpuidleSpec, seed: u64) -> Cpuidle {
        Cpuidle {
            exit_latency: spec.exit_latency.clone(),
            deeper: spec.deeper.clone(),
            rng: Rng::stream(seed, STREAM),
        }
    }

    /// The exit latency of a halt that has lasted `residency`: drawn from the deepest state
    /// whose target residency it reached (one draw from the one stream, whichever state).
    pub fn draw(&mut self, residency: Ns) -> Ns {
        let dist = self
            .deeper
            .iter()
            .rev()
            .find(|d| d.target_residency_ns <= residency)
            .map_or(&self.exit_latency, |d| &d.exit_latency);
        dist.sample(&mut self.rng)
    }
}

impl Node {
    /// Called where `schedule` starts on a CPU that runs nothing: whether the pick must wait
    /// for the CPU to leave its idle state (and, for a halted CPU with work queued, start
    /// leaving it now).
    pub(crate) fn idle_exit_pending(&mut self, cpu: CpuId) -> bool {
        match self.cpus[cpu].idle_state {
            IdleState::Awake => false,
            IdleState::Exiting(_) => true,
            IdleState::Halted(since) => {
                if self.rqs[self.root_rq(cpu)].h_nr_running == 0 {
                    // nothing to wake it for: it looks for work to pull (newidle balance) and,
                    // finding none, stays halted
                    return false;
                }
                let Some(idle) = self.cpuidle.as_mut() else {
                    return false;
                };
                let at = self.now + idle.draw(self.now.saturating_sub(since));
                self.cpus[cpu].idle_state = IdleState::Exiting(at);
                self.reprogram(cpu);
                true
            }
        }
    }

    /// The CPU event of a CPU leaving its idle state: it is awake and schedules. False if
    /// the CPU is not leaving one.
    pub(crate) fn idle_exit_done(&mut self, cpu: CpuId) -> bool {
        if !matches!(self.cpus[cpu].idle_state, IdleState::Exiting(_)) {
            return false;
        }
        self.cpus[cpu].idle_state = IdleState::Awake;
        self.schedule(cpu);
        true
    }

    /// After a pick: a CPU that found nothing enters its idle state (if the node has one).
    pub(crate) fn enter_idle_state(&mut self, cpu: CpuId, running: bool) {
        self.cpus[cpu].idle_state = if running || self.cpuidle.is_none() {
            IdleState::Awake
        } else if let IdleState::Halted(since) = self.cpus[cpu].idle_state {
            // still halted (a schedule that found nothing to wake for): the halt goes on
            IdleState::Halted(since)
        } else {
            IdleState::Halted(self.now)
        };
    }

    /// Whether the tasks queued on `cpu` are still on its wake list: a remote wakeup
    /// (TTWU_QUEUE, `ttwu_queue_wakelist`) is enqueued by the target CPU itself once it is
    /// out of its idle state, so until then nobody can pull them (and `idle_cpu` is false:
    /// `rq->ttwu_pending`, as the model's queued count says).
    pub(crate) fn on_wake_list(&self, cpu: CpuId) -> bool {
        matches!(self.cpus[cpu].idle_state, IdleState::Exiting(_))
    }

    /// The time of the CPU event that ends an exit from the idle state, if one is under way.
    pub(crate) fn idle_exit_at(&self, cpu: CpuId) -> Option<Ns> {
        match self.cpus[cpu].idle_state {
            IdleState::Exiting(at) => Some(at),
            _ => None,
        }
    }
}
