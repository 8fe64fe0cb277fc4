//! colosim-core: a deterministic discrete-event model of one Linux node's CPU scheduling —
//! hierarchical CFS over cgroups (cpu.shares, cpu.idle, openEuler cpu.qos_level), SMT,
//! placement and balancing — driven by workloads (CPU hogs, closed- and open-loop services).
//! Pure Rust; the PyO3 binding lives in the sibling crate `colosim-py`.

pub mod arith;
pub mod autogroup;
pub mod balance;
pub mod bandwidth;
pub mod cfs;
pub mod cfs_rq;
pub mod cgroup;
pub mod contention;
pub mod cpuidle;
pub mod cpuset;
pub mod disk;
pub mod dist;
pub mod eevdf;
pub mod error;
pub mod event_loop;
pub mod events;
pub mod fluid;
pub mod lb_groups;
pub mod lru;
pub mod memcg;
pub mod net;
pub mod newidle;
pub mod node;
pub mod node_io;
pub mod node_memory;
pub mod pelt;
pub mod psi;
pub mod remote_wakeup;
pub mod resctrl;
pub mod rng;
pub mod sched_features;
pub mod shape;
pub mod sis_util;
pub mod slice;
pub mod spec;
pub mod stats;
pub mod steal;
pub mod topology;
pub mod tunables;
pub mod workload;

pub use error::{Result, SpecError};
pub use events::Ns;
pub use node::Node;
pub use spec::NodeSpec;
