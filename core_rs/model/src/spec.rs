//! The core spec: a plain description of one node (topology, kernel tunables, cgroups,
//! workloads) that Python sends once as JSON. Validation here is the last line of defence;
//! every message names the field by its path in this document.

use crate::dist::Dist;
use crate::error::{Result, SpecError};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    #[serde(default)]
    pub seed: u64,
    pub topology: TopologySpec,
    #[serde(default)]
    pub kernel: KernelSpec,
    #[serde(default)]
    pub cgroups: Vec<CgroupSpec>,
    #[serde(default)]
    pub workloads: Vec<WorkloadSpec>,
    /// Time-series sampling interval; 0 turns sampling off.
    #[serde(default)]
    pub sample_interval_ns: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    #[serde(default = "one")]
    pub sockets: u32,
    #[serde(default = "one")]
    pub numa_nodes_per_socket: u32,
    pub cores_per_socket: u32,
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Speed of each SMT thread while its sibling also runs (≈0.6: a core gives ≈1.2× one
    /// thread; ../shared/reference/kernel-and-anchors.md §B).
    #[serde(default = "default_smt_speed")]
    pub smt_speed: f64,
    /// Speed of a task running on another NUMA node than its memory: 0.75, i.e. 1.33× slower
    /// — remote DRAM costs 1.5–2× on the memory-bound part of the work (kernel-and-anchors.md
    /// §B suggests ×1.5, range 1.3–2.0, applied to that fraction only).
    #[serde(default = "default_numa_remote_speed")]
    pub numa_remote_speed: f64,
    /// Logical ids sharing one physical core; default is Linux's usual x86 numbering where
    /// CPU c and c + ncores are siblings.
    #[serde(default)]
    pub siblings: Option<Vec<Vec<u32>>>,
}

fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}
fn default_smt_speed() -> f64 {
    0.6
}
fn default_numa_remote_speed() -> f64 {
    0.75
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// CFS, Linux ≤ 6.5.
    #[default]
    Cfs,
    /// EEVDF, Linux ≥ 6.6.
    Eevdf,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    #[serde(default)]
    pub scheduler: SchedulerKind,
    pub hz: Option<u32>,
    pub sched_latency_ns: Option<u64>,
    pub sched_min_granularity_ns: Option<u64>,
    pub sched_wakeup_granularity_ns: Option<u64>,
    pub sched_idle_min_granularity_ns: Option<u64>,
    /// EEVDF base slice as debugfs base_slice_ns shows it (already scaled): None = the
    /// kernel's 0.70 ms × (1 + ilog2(min(ncpus, 8))) (6.15+, 6.12.y; 0.75 ms before).
    pub base_slice_ns: Option<u64>,
    /// openEuler SMT expeller (CONFIG_QOS_SCHED_SMT_EXPELLER): offline (qos_level = -1) tasks
    /// do not run on the SMT sibling of a CPU running online work.
    #[serde(default)]
    pub smt_expeller: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    pub name: String,
    #[serde(default)]
    pub parent: String,
    #[serde(rename = "cpu.shares", default = "default_shares")]
    pub shares: u64,
    #[serde(rename = "cpu.idle", default)]
    pub idle: i64,
    #[serde(rename = "cpu.qos_level", default)]
    pub qos_level: i64,
    /// cgroup v1 CFS bandwidth knobs, in their files' units (µs; quota -1 = no limit).
    #[serde(rename = "cpu.cfs_quota_us", default = "no_quota")]
    pub cfs_quota_us: i64,
    #[serde(rename = "cpu.cfs_period_us", default = "default_period_us")]
    pub cfs_period_us: i64,
    #[serde(rename = "cpu.cfs_burst_us", default)]
    pub cfs_burst_us: i64,
    /// cpuset.cpus / cpuset.mems in the kernel's list format ("0-3,6"); None = the parent's.
    #[serde(rename = "cpuset.cpus", default)]
    pub cpuset_cpus: Option<String>,
    #[serde(rename = "cpuset.mems", default)]
    pub cpuset_mems: Option<String>,
}

fn default_shares() -> u64 {
    1024
}
fn no_quota() -> i64 {
    -1
}
fn default_period_us() -> i64 {
    (crate::bandwidth::DEFAULT_PERIOD / 1000) as i64
}

/// Bandwidth knob values (µs, as in the files) to (quota, period, burst) in ns.
pub fn bandwidth_ns(field: &str, quota_us: i64, period_us: i64, burst_us: i64) -> Result<(Option<u64>, u64, u64)> {
    if quota_us < -1 || quota_us == 0 {
        return Err(SpecError::new(field, format!("cpu.cfs_quota_us must be -1 (no limit) or >= 1000 (got {quota_us})")));
    }
    if period_us <= 0 {
        return Err(SpecError::new(field, format!("cpu.cfs_period_us must be in 1000..=1000000 (got {period_us})")));
    }
    if burst_us < 0 {
        return Err(SpecError::new(field, format!("cpu.cfs_burst_us must be >= 0 (got {burst_us})")));
    }
    let quota = if quota_us == -1 { None } else { Some(quota_us as u64 * 1000) };
    let (period, burst) = (period_us as u64 * 1000, burst_us as u64 * 1000);
    crate::bandwidth::check_bandwidth(field, quota, period, burst)?;
    Ok((quota, period, burst))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkloadSpec {
    /// `stress --cpu N`: N threads that never sleep.
    Hog {
        name: String,
        cgroup: String,
        threads: u32,
        #[serde(default)]
        start_ns: u64,
    },
    /// C clients, each with one request in flight; a request fans out to `fanout` threads and
    /// completes when all of them have (clickhouse-benchmark -c C with max_threads = fanout).
    ClosedLoop {
        name: String,
        cgroup: String,
        clients: u32,
        #[serde(default = "one")]
        fanout: u32,
        service: Dist,
        #[serde(default)]
        think: Option<Dist>,
        /// Serve the clients' requests with a pool of this many threads (a server with a
        /// fixed number of workers, e.g. Go's GOMAXPROCS): requests queue for a free worker
        /// and their latency includes the wait. None: a thread per client (and fanout).
        #[serde(default)]
        workers: Option<u32>,
        #[serde(default)]
        start_ns: u64,
    },
    /// Steady load on `steady_threads`, plus `burst_threads` that each get `length_ns` of
    /// work every `every_ns` (the first spell at start + every).
    Bursty {
        name: String,
        cgroup: String,
        #[serde(default = "one")]
        steady_threads: u32,
        #[serde(default = "two")]
        burst_threads: u32,
        every_ns: u64,
        length_ns: u64,
        #[serde(default)]
        start_ns: u64,
    },
    /// Poisson arrivals at `rate_per_s` into a FIFO queue served by `workers` threads.
    OpenLoop {
        name: String,
        cgroup: String,
        rate_per_s: f64,
        workers: u32,
        service: Dist,
        #[serde(default)]
        start_ns: u64,
    },
}

impl WorkloadSpec {
    pub fn name(&self) -> &str {
        match self {
            WorkloadSpec::Hog { name, .. }
            | WorkloadSpec::ClosedLoop { name, .. }
            | WorkloadSpec::OpenLoop { name, .. }
            | WorkloadSpec::Bursty { name, .. } => name,
        }
    }
    pub fn cgroup(&self) -> &str {
        match self {
            WorkloadSpec::Hog { cgroup, .. }
            | WorkloadSpec::ClosedLoop { cgroup, .. }
            | WorkloadSpec::OpenLoop { cgroup, .. }
            | WorkloadSpec::Bursty { cgroup, .. } => cgroup,
        }
    }
}

/// cgroup v1 cpu.shares limits: MIN_SHARES = 2, MAX_SHARES = 2^18
/// (kernel-and-anchors.md §A2, `__sched_group_set_shares`).
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 1 << 18;

/// The knobs the simulated cgroups have, by their cgroup v1 file names.
pub const KNOBS: [&str; 9] = [
    "cpu.shares",
    "cpu.idle",
    "cpu.qos_level",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpu.cfs_burst_us",
    "cpuset.cpus",
    "cpuset.mems",
    "cgroup.kill",
];

pub fn check_knob(field: &str, knob: &str, value: i64) -> Result<()> {
    let bad = |why: String| Err(SpecError::new(field, why));
    match knob {
        "cpu.shares" => {
            if value < MIN_SHARES as i64 || value > MAX_SHARES as i64 {
                return bad(format!("cpu.shares must be in {MIN_SHARES}..={MAX_SHARES} (got {value})"));
            }
        }
        "cpu.idle" => {
            if value != 0 && value != 1 {
                return bad(format!("cpu.idle must be 0 or 1 (got {value})"));
            }
        }
        "cgroup.kill" => {
            if value != 1 {
                return bad(format!("cgroup.kill only takes 1 (got {value})"));
            }
        }
        "cpu.qos_level" => {
            if value != 0 && value != -1 {
                return bad(format!("cpu.qos_level must be -1 (offline) or 0 (online) (got {value})"));
            }
        }
        // Ranges of these are checked together (they constrain each other) by bandwidth_ns.
        "cpu.cfs_quota_us" | "cpu.cfs_period_us" | "cpu.cfs_burst_us" => {}
        "cpuset.cpus" | "cpuset.mems" => return bad(format!("{knob} takes a list like \"0-3,6\", not a number")),
        _ => return bad(format!("unknown knob {knob:?} (known: {})", KNOBS.join(", "))),
    }
    Ok(())
}

impl NodeSpec {
    pub fn from_json(text: &str) -> Result<NodeSpec> {
        let spec: NodeSpec = serde_json::from_str(text)
            .map_err(|e| SpecError::new("", format!("core spec: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn validate(&self) -> Result<()> {
        let t = &self.topology;
        for (name, v) in [
            ("sockets", t.sockets),
            ("numa_nodes_per_socket", t.numa_nodes_per_socket),
            ("cores_per_socket", t.cores_per_socket),
            ("threads_per_core", t.threads_per_core),
        ] {
            if v == 0 {
                return Err(SpecError::new(format!("topology.{name}"), "must be >= 1 (got 0)"));
            }
        }
        let ncpus = t.sockets as u64 * t.cores_per_socket as u64 * t.threads_per_core as u64;
        if ncpus > 4096 {
            return Err(SpecError::new("topology", format!("{ncpus} logical CPUs; at most 4096")));
        }
        if t.cores_per_socket % t.numa_nodes_per_socket != 0 {
            return Err(SpecError::new(
                "topology.numa_nodes_per_socket",
                format!("must divide cores_per_socket ({})", t.cores_per_socket),
            ));
        }
        if !(t.smt_speed > 0.0 && t.smt_speed <= 1.0) {
            return Err(SpecError::new("topology.smt_speed", format!("must be in (0, 1] (got {})", t.smt_speed)));
        }
        if !(t.numa_remote_speed > 0.0 && t.numa_remote_speed <= 1.0) {
            return Err(SpecError::new(
                "topology.numa_remote_speed",
                format!("must be in (0, 1] (got {})", t.numa_remote_speed),
            ));
        }
        if let Some(hz) = self.kernel.hz {
            if !(100..=1000).contains(&hz) {
                return Err(SpecError::new("kernel.hz", format!("must be in 100..=1000 (got {hz})")));
            }
        }
        let mut names: Vec<&str> = vec![""];
        for (i, cg) in self.cgroups.iter().enumerate() {
            let f = |k: &str| format!("cgroups[{i}].{k}");
            if cg.name.is_empty() {
                return Err(SpecError::new(f("name"), "must not be empty (the root is implicit)"));
            }
            if names.contains(&cg.name.as_str()) {
                return Err(SpecError::new(f("name"), format!("cgroup {:?} declared twice", cg.name)));
            }
            if !names.contains(&cg.parent.as_str()) {
                return Err(SpecError::new(
                    f("parent"),
                    format!("no cgroup named {:?} declared before {:?}", cg.parent, cg.name),
                ));
            }
            let depth = 1 + std::iter::successors(Some(cg.parent.as_str()), |p| {
                self.cgroups.iter().find(|c| c.name == *p).map(|c| c.parent.as_str())
            })
            .take_while(|p| !p.is_empty())
            .count();
            if depth >= crate::cfs::MAX_DEPTH {
                return Err(SpecError::new(f("parent"), format!("nesting deeper than {} levels", crate::cfs::MAX_DEPTH - 1)));
            }
            check_knob(&f("cpu.shares"), "cpu.shares", cg.shares as i64)?;
            check_knob(&f("cpu.idle"), "cpu.idle", cg.idle)?;
            check_knob(&f("cpu.qos_level"), "cpu.qos_level", cg.qos_level)?;
            bandwidth_ns(&f("cpu.cfs_quota_us"), cg.cfs_quota_us, cg.cfs_period_us, cg.cfs_burst_us)?;
            names.push(&cg.name);
        }
        let mut wl_names: Vec<&str> = vec![];
        for (i, w) in self.workloads.iter().enumerate() {
            let f = |k: &str| format!("workloads[{i}].{k}");
            if wl_names.contains(&w.name()) {
                return Err(SpecError::new(f("name"), format!("workload {:?} declared twice", w.name())));
            }
            wl_names.push(w.name());
            if !names.contains(&w.cgroup()) {
                return Err(SpecError::new(
                    f("cgroup"),
                    format!("no cgroup named {:?} (declared: {})", w.cgroup(), names[1..].join(", ")),
                ));
            }
            match w {
                WorkloadSpec::Hog { .. } => {}
                WorkloadSpec::ClosedLoop { clients, fanout, service, think, workers, .. } => {
                    if *clients == 0 {
                        return Err(SpecError::new(f("clients"), "must be >= 1"));
                    }
                    if *fanout == 0 {
                        return Err(SpecError::new(f("fanout"), "must be >= 1"));
                    }
                    if *workers == Some(0) {
                        return Err(SpecError::new(f("workers"), "must be >= 1"));
                    }
                    if workers.is_some() && *fanout != 1 {
                        return Err(SpecError::new(f("workers"), "a worker pool serves requests of fanout 1"));
                    }
                    service.validate(&f("service"))?;
                    if let Some(t) = think {
                        t.validate(&f("think"))?;
                    }
                }
                WorkloadSpec::Bursty { burst_threads, every_ns, length_ns, .. } => {
                    if *burst_threads == 0 {
                        return Err(SpecError::new(f("burst_threads"), "must be >= 1"));
                    }
                    if *every_ns == 0 {
                        return Err(SpecError::new(f("every_ns"), "must be > 0"));
                    }
                    if *length_ns == 0 {
                        return Err(SpecError::new(f("length_ns"), "must be > 0"));
                    }
                }
                WorkloadSpec::OpenLoop { rate_per_s, workers, service, .. } => {
                    if !(rate_per_s.is_finite() && *rate_per_s > 0.0) {
                        return Err(SpecError::new(f("rate_per_s"), format!("must be > 0 (got {rate_per_s})")));
                    }
                    if *workers == 0 {
                        return Err(SpecError::new(f("workers"), "must be >= 1"));
                    }
                    service.validate(&f("service"))?;
                }
            }
        }
        Ok(())
    }
}
