//! The core spec: a plain description of one node (topology, kernel tunables, cgroups,
//! workloads) that Python sends once as JSON. Validation here is the last line of defence;
//! every message names the field by its path in this document.

use crate::dist::Dist;
use crate::error::{Result, SpecError};
use crate::shape::Shape;
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
    /// The node's memory (memcg model); None: memory is not modelled, and no workload may
    /// allocate.
    #[serde(default)]
    pub memory: Option<MemorySpec>,
    /// The node's block device (disk.rs); None: no workload may do IO.
    #[serde(default)]
    pub disk: Option<crate::disk::DiskSpec>,
    /// The node's egress link (net.rs); None: no workload may send.
    #[serde(default)]
    pub network: Option<NetworkSpec>,
    /// Shared hardware (contention.rs): clock, LLC, memory bandwidth, the workloads'
    /// contention profiles and the resctrl groups set up before the run.
    #[serde(default)]
    pub hardware: crate::contention::HardwareSpec,
    /// The idle state a CPU with nothing to run enters (cpuidle.rs); None: a wakeup of an
    /// idle CPU runs at once.
    #[serde(default)]
    pub cpuidle: Option<crate::cpuidle::CpuidleSpec>,
    /// What a wakeup across CPUs costs its two ends (remote_wakeup.rs); None: nothing.
    #[serde(default)]
    pub remote_wakeup: Option<crate::remote_wakeup::RemoteWakeupSpec>,
    /// The stalls the hypervisor makes on busy CPUs (steal.rs); None: none.
    #[serde(default)]
    pub steal: Option<crate::steal::StealSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Link bandwidth (bytes/s).
    pub egress_bytes_per_s: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    pub total_bytes: u64,
    /// Swap space; 0 (the default): anonymous memory cannot be reclaimed.
    #[serde(default)]
    pub swap_bytes: u64,
    /// CPU a task spends per page it reclaims itself. Not a kernel constant: direct reclaim
    /// of clean page cache runs at a few GB/s per core, ≈ 1 µs per 4 KiB page.
    #[serde(default = "default_reclaim_ns_per_page")]
    pub reclaim_ns_per_page: u64,
    /// vm.watermark_scale_factor (default 10: 0.1% of memory between watermarks).
    #[serde(default = "default_watermark_scale_factor")]
    pub watermark_scale_factor: u64,
}

fn default_reclaim_ns_per_page() -> u64 {
    1_000
}
fn default_watermark_scale_factor() -> u64 {
    10
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
/// A local SSD: 100 µs a read, 500 MB/s.
fn default_disk_latency() -> u64 {
    100_000
}
fn default_disk_bandwidth() -> u64 {
    500_000_000
}
/// Copying a page into the cache: ≈ 1 µs (a write at ~4 GB/s).
fn default_write_ns() -> u64 {
    1_000
}

/// A page read back from swap (≈ 10–50 µs on an SSD) against ≈ 1 µs of work per page touched.
fn default_fault_penalty() -> f64 {
    20.0
}

/// 10 ms: short against a trace's seconds, long against the scheduler's slices.
fn default_duty_period() -> u64 {
    10_000_000
}

fn default_chunk() -> u64 {
    1 << 20
}
/// Writing a fresh 4 KiB page: the fault (≈ 0.5 µs) and the memset (≈ 0.3 µs).
fn default_touch_ns() -> u64 {
    800
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HogMode {
    Keep,
    Hang,
    #[default]
    Churn,
}

fn yes() -> bool {
    true
}
fn default_read_bytes() -> u64 {
    4096
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DdOp {
    Read,
    #[default]
    Write,
}

/// A server's accept backlog: net.core.somaxconn, whose default is 4096 since Linux 5.4
/// (commit 19f92a030ca6 "net: increase SOMAXCONN to 4096"; 128 before), the cap of every
/// listen() backlog (nginx's `listen ... backlog=`, Go's net.Listen take it as is).
pub const DEFAULT_BACKLOG: u32 = 4096;
fn default_backlog() -> u32 {
    DEFAULT_BACKLOG
}
/// The largest backlog the core keeps (8 bytes a waiting request: 128 MiB).
pub const MAX_BACKLOG: u32 = 1 << 24;

/// Logical CPUs: x86's NR_CPUS upper bound with CONFIG_MAXSMP (arch/x86/Kconfig,
/// NR_CPUS_RANGE_END = 8192).
pub const NR_CPUS: u64 = 8192;
/// NUMA nodes: MAX_NUMNODES with x86's largest CONFIG_NODES_SHIFT (10).
pub const MAX_NUMNODES: u64 = 1024;
/// SMT threads a core has: 8 on POWER8 and later (x86 has 2, Xeon Phi 4).
pub const MAX_SMT: u32 = 8;
/// Threads (and clients, flows) of all workloads together: the kernel's PID_MAX_LIMIT on
/// 64-bit (include/linux/threads.h: 4 × 1024 × 1024), the most tasks a node can have.
pub const PID_MAX_LIMIT: u64 = 4 * 1024 * 1024;

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
    /// Alibaba Cloud Linux memcg extensions (Koordinator writes them): memory.wmark_ratio /
    /// memory.wmark_scale_factor async reclaim, memory.wmark_min_adj, memory.priority /
    /// memory.use_priority_oom.
    #[serde(default)]
    pub alinux_memcg: bool,
    /// openEuler's memory.high_async_ratio (rubik writes it).
    #[serde(default)]
    pub openeuler_memcg: bool,
    /// vm.dirty_ratio / vm.dirty_background_ratio (percent of dirtyable memory; 20 and 10,
    /// mm/page-writeback.c).
    pub dirty_ratio: Option<u64>,
    pub dirty_background_ratio: Option<u64>,
    /// Writeback is charged to the cgroup that dirtied the pages (cgroup v2 with io and memory
    /// together; openEuler v1 with cgroup1_writeback and memory.wb_blkio_ino). Off: the
    /// flusher's IO is the root cgroup's, as on plain cgroup v1.
    #[serde(default)]
    pub cgroup_writeback: bool,
    /// The memory controller is cgroup v1's (legacy memcg): a task's limit reclaim waits for
    /// the writeback of dirty pages it meets again (mm/vmscan.c `writeback_throttling_sane`
    /// false; lru.rs). Off: v2's, which does not wait there.
    #[serde(default)]
    pub memcg_v1: bool,
    /// Where the CFS bandwidth period timers' boundaries fall: a boundary of every group's timer
    /// lies this long after the scenario start (then every cpu.cfs_period_us). None draws one
    /// per group from the seed, as Linux ≥ 6.4 draws it at random (bandwidth.rs,
    /// `start_cfs_bandwidth`).
    pub cfs_period_phase_ns: Option<u64>,
    /// kernel.sched_autogroup_enabled (autogroup.rs): tasks of the root task group run in a
    /// task group of their session, beside the root's cgroups. Off by default, as a scenario
    /// without it always ran.
    #[serde(default)]
    pub autogroup: bool,
    /// Which session each root-cgroup workload is in (workload name → session name); a
    /// workload not named here is a session of its own (autogroup.rs).
    #[serde(default)]
    pub autogroup_sessions: std::collections::BTreeMap<String, String>,
    /// The kernel release whose fair class EEVDF follows ("6.6", "6.12", "6.18.44"; None =
    /// "6.6"), and features.h switches by name that override its defaults (sched_features.rs).
    pub version: Option<String>,
    #[serde(default)]
    pub sched_features: std::collections::BTreeMap<String, bool>,
    /// Where `calc_group_shares` takes a CPU's load from (pelt.rs).
    #[serde(default)]
    pub group_shares: GroupShares,
    /// Custom EEVDF slices by workload (`[workloads.x] sched_runtime_ns`: what its threads
    /// pass as `sched_attr.sched_runtime` to sched_setattr, 6.12+; 0 = base_slice).
    #[serde(default)]
    pub sched_runtime_ns: std::collections::BTreeMap<String, u64>,
    /// Workloads whose threads read their own CPU clock while they compute (`[workloads.x]
    /// reads_cpu_clock`; slice.rs `exact slice ends`).
    #[serde(default)]
    pub cpu_clock_readers: std::collections::BTreeSet<String>,
}

/// `[kernel] group_shares`: how a group entity's weight is computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupShares {
    /// From instantaneous queue weights, re-weighed when a queue's entities change (the
    /// model's first approximation; every result before PELT).
    #[default]
    Instant,
    /// As the kernel: max(load.weight, PELT load_avg) against the group's Σ published
    /// load_avg, re-weighed at every enqueue, dequeue and tick (`update_cfs_group`).
    Pelt,
}

impl KernelSpec {
    /// The EEVDF switches of `version` with the `sched_features` overrides.
    pub fn features(&self) -> Result<crate::sched_features::SchedFeatures> {
        crate::sched_features::SchedFeatures::from_spec(self.version.as_deref(), &self.sched_features)
    }

    /// (vm.dirty_ratio, vm.dirty_background_ratio), the kernel's defaults when not given.
    pub fn dirty_ratios(&self) -> (u64, u64) {
        (
            self.dirty_ratio.unwrap_or(20),
            self.dirty_background_ratio.unwrap_or(10),
        )
    }
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
    /// memcg limits and protections in bytes (v1 memory.limit_in_bytes = v2 memory.max;
    /// memory.high/low/min as Alibaba Cloud Linux's v1 and upstream v2 have them); -1 or
    /// absent: no limit.
    #[serde(rename = "memory.limit_in_bytes", default = "no_limit")]
    pub memory_max: i64,
    #[serde(rename = "memory.high", default = "no_limit")]
    pub memory_high: i64,
    #[serde(rename = "memory.low", default)]
    pub memory_low: i64,
    #[serde(rename = "memory.min", default)]
    pub memory_min: i64,
    #[serde(rename = "memory.oom.group", default)]
    pub memory_oom_group: i64,
    /// IO and network knobs (disk.rs, net.rs), by their v1 file names; integers as the
    /// core takes them (the device number of the *_device files is implicit: one disk).
    #[serde(rename = "blkio.weight", default = "default_io_weight")]
    pub blkio_weight: i64,
    #[serde(rename = "blkio.cost.weight", default = "default_io_weight")]
    pub blkio_cost_weight: i64,
    #[serde(rename = "blkio.throttle.read_bps_device", default)]
    pub read_bps: i64,
    #[serde(rename = "blkio.throttle.write_bps_device", default)]
    pub write_bps: i64,
    #[serde(rename = "blkio.throttle.read_iops_device", default)]
    pub read_iops: i64,
    #[serde(rename = "blkio.throttle.write_iops_device", default)]
    pub write_iops: i64,
    #[serde(rename = "net_cls.classid", default)]
    pub net_classid: i64,
    #[serde(rename = "net.egress_bps", default)]
    pub net_egress_bps: i64,
}

fn default_io_weight() -> i64 {
    crate::disk::DEFAULT_WEIGHT as i64
}

impl CgroupSpec {
    /// A knob's value when the scenario does not set it.
    pub fn io_default(knob: &str) -> i64 {
        match knob {
            "blkio.weight" | "blkio.cost.weight" => default_io_weight(),
            _ => 0,
        }
    }

    /// The IO and network knobs with their values, in KNOBS order.
    pub fn io_knobs(&self) -> [(&'static str, i64); 8] {
        [
            ("blkio.weight", self.blkio_weight),
            ("blkio.cost.weight", self.blkio_cost_weight),
            ("blkio.throttle.read_bps_device", self.read_bps),
            ("blkio.throttle.write_bps_device", self.write_bps),
            ("blkio.throttle.read_iops_device", self.read_iops),
            ("blkio.throttle.write_iops_device", self.write_iops),
            ("net_cls.classid", self.net_classid),
            ("net.egress_bps", self.net_egress_bps),
        ]
    }
}

fn no_limit() -> i64 {
    -1
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
        return Err(SpecError::new(
            field,
            format!("cpu.cfs_quota_us must be -1 (no limit) or >= 1000 (got {quota_us})"),
        ));
    }
    if period_us <= 0 {
        return Err(SpecError::new(
            field,
            format!("cpu.cfs_period_us must be in 1000..=1000000 (got {period_us})"),
        ));
    }
    if burst_us < 0 {
        return Err(SpecError::new(
            field,
            format!("cpu.cfs_burst_us must be >= 0 (got {burst_us})"),
        ));
    }
    let quota = if quota_us == -1 {
        None
    } else {
        Some(quota_us as u64 * 1000)
    };
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
        /// How the pool's workers take requests (`Dispatch`); only with `workers`.
        #[serde(default)]
        dispatch: Dispatch,
        /// When the pool's workers write their replies (`Replies`); only with `workers`.
        #[serde(default)]
        replies: Replies,
        /// A request's CPU on each of its threads as bursts and waits (shape.rs); None or
        /// one burst: one burst, as without it.
        #[serde(default)]
        shape: Option<Shape>,
        /// CPU the load generator spends per request, on a task of each client in the
        /// workload's cgroup, before it sends the request (wrk's or clickhouse-benchmark's own
        /// work when it runs beside the server). None: the clients cost no CPU.
        #[serde(default)]
        client_cpu: Option<Dist>,
        /// A wait per request inside its latency, between the client's CPU and the server
        /// (workload.rs `ClosedLoop::delay`). None: none.
        #[serde(default)]
        delay: Option<Dist>,
        /// The exchange between a client and the server in this many rounds (shape.rs
        /// `Rounds`): `client_cpu` and each server thread's CPU split into equal parts that
        /// alternate, as a generator that parses result blocks while the server produces the
        /// next. Needs `client_cpu`; None or 1: the client's CPU in one burst before the request.
        #[serde(default)]
        rounds: Option<u32>,
        /// How the rounds go (`Exchange`): one side at a time, or streamed.
        #[serde(default)]
        exchange: Exchange,
        /// What each message between a client and the server costs its receiver when the
        /// two ran on different CPUs (`CrossCpu`). Only with `client_cpu` (the generator's
        /// task is a message's other end). None: nothing.
        #[serde(default)]
        cross_cpu: Option<CrossCpu>,
        /// The load generator's threads, serving its clients in turn (redis-benchmark's one
        /// event loop, wrk -t, pgbench -j). Only with `client_cpu` (without it the generator
        /// costs nothing), and one round. None: a task per
        /// client (clickhouse-benchmark's thread per connection).
        #[serde(default)]
        client_threads: Option<u32>,
        /// The generator's threads are event loops (event_loop.rs): each owns its clients, a
        /// pass takes what was ready when it began (a read re-arms the connection's write for
        /// a later pass), and a latency runs from a request's write to its reply's read. Needs `client_cpu` and `client_threads`, no
        /// think time, one round. None: a latency runs round the whole loop.
        #[serde(default)]
        event_loop: Option<EventLoopSpec>,
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
    /// `stress --vm N --vm-bytes B`: N workers (processes) that each allocate `bytes` in
    /// `chunk_bytes` steps, touching every page (`touch_ns_per_page` of CPU a page), then
    /// keep it and re-dirty it (`keep`, --vm-keep: CPU-bound, memory held), hold it asleep
    /// for `hang_ns` and free it (`hang`, --vm-hang), or free it at once (`churn`, the
    /// default of stress) — and start over.
    MemoryHog {
        name: String,
        cgroup: String,
        #[serde(default = "one")]
        threads: u32,
        bytes: u64,
        #[serde(default = "default_chunk")]
        chunk_bytes: u64,
        #[serde(default = "default_touch_ns")]
        touch_ns_per_page: u64,
        #[serde(default)]
        mode: HogMode,
        #[serde(default)]
        hang_ns: u64,
        /// /proc/PID/oom_score_adj of its processes (-1000..=1000).
        #[serde(default)]
        oom_score_adj: i64,
        #[serde(default)]
        start_ns: u64,
    },
    /// A file-serving service (nginx behind siege): `clients` with one request in flight,
    /// each reading a file of `file_bytes` from a `working_set_bytes` set; a page-cache miss
    /// waits for one disk serving reads in order (`disk_latency_ns` + size / `disk_bytes_per_s`
    /// each) and fills the cache.
    FileServer {
        name: String,
        cgroup: String,
        clients: u32,
        service: Dist,
        #[serde(default)]
        think: Option<Dist>,
        working_set_bytes: u64,
        file_bytes: u64,
        #[serde(default = "default_disk_latency")]
        disk_latency_ns: u64,
        #[serde(default = "default_disk_bandwidth")]
        disk_bytes_per_s: u64,
        #[serde(default)]
        start_ns: u64,
    },
    /// `dd` / `stress --hdd`: threads writing files forever; the written pages stay in the
    /// page cache of their cgroup until reclaim takes them.
    CacheWriter {
        name: String,
        cgroup: String,
        #[serde(default = "one")]
        threads: u32,
        #[serde(default = "default_chunk")]
        chunk_bytes: u64,
        #[serde(default = "default_write_ns")]
        write_ns_per_page: u64,
        #[serde(default)]
        start_ns: u64,
    },
    /// An in-memory analytics job (Spark's collaborative filtering): `threads` workers that
    /// each hold `working_set_bytes / threads` of anonymous memory and run tasks of `work_ns`
    /// CPU one after another; a task's CPU grows by `fault_penalty` × the share of the
    /// worker's set that is swapped out (each such page faults back from swap), so the job
    /// slows when its working set does not fit. A task is a "request": its time is recorded.
    Analytics {
        name: String,
        cgroup: String,
        #[serde(default = "one")]
        threads: u32,
        working_set_bytes: u64,
        work_ns: u64,
        #[serde(default = "default_fault_penalty")]
        fault_penalty: f64,
        #[serde(default)]
        start_ns: u64,
    },
    /// CPU demand that follows a trace: `cores` (changed at run time, `set_workload`) spread
    /// over up to `max_threads` threads; thread k runs min(1, cores − k) of every `period_ns`
    /// and sleeps the rest (a duty cycle), so the group asks for exactly `cores` CPUs.
    Duty {
        name: String,
        cgroup: String,
        max_threads: u32,
        #[serde(default)]
        cores: f64,
        #[serde(default = "default_duty_period")]
        period_ns: u64,
        #[serde(default)]
        start_ns: u64,
    },
    /// `dd`: `threads` copies each moving `block_bytes` per IO (queue depth 1), `bytes` in
    /// all per thread (None: forever); reads or writes, O_DIRECT or through the page cache
    /// (`direct = false`); sequential unless `random`. Each block is a request of its service
    /// (its latency: the block's syscall CPU and its IO).
    Dd {
        name: String,
        cgroup: String,
        #[serde(default)]
        op: DdOp,
        #[serde(default = "yes")]
        direct: bool,
        #[serde(default = "default_chunk")]
        block_bytes: u64,
        #[serde(default)]
        bytes: Option<u64>,
        #[serde(default = "one")]
        threads: u32,
        #[serde(default)]
        random: bool,
        /// CPU per block; None: 10 µs + 0.4 µs a page for direct IO, 1 µs a page buffered.
        #[serde(default)]
        cpu_ns_per_block: Option<u64>,
        #[serde(default)]
        start_ns: u64,
    },
    /// A database-like service: `clients` with one request in flight; a request does `reads`
    /// random reads of `read_bytes` one after another (index and row lookups missing the
    /// buffer pool), then its `service` CPU.
    Database {
        name: String,
        cgroup: String,
        clients: u32,
        #[serde(default = "one")]
        reads: u32,
        #[serde(default = "default_read_bytes")]
        read_bytes: u64,
        service: Dist,
        #[serde(default)]
        think: Option<Dist>,
        #[serde(default)]
        start_ns: u64,
    },
    /// `iperf3 -c … -P streams [-b rate]`: `streams` flows sending from this cgroup during
    /// each of `windows_ns` ([start, stop) pairs; none: from `start_ns` on), each at up to
    /// `rate_bytes_per_s` (0: as fast as the link lets it).
    Iperf {
        name: String,
        cgroup: String,
        #[serde(default = "one")]
        streams: u32,
        #[serde(default)]
        rate_bytes_per_s: u64,
        #[serde(default)]
        windows_ns: Vec<[u64; 2]>,
        #[serde(default)]
        start_ns: u64,
    },
    /// Poisson arrivals at `rate_per_s` into a FIFO queue served by `workers` threads; at
    /// most `backlog` requests wait, and arrivals that find it full are dropped (counted).
    OpenLoop {
        name: String,
        cgroup: String,
        rate_per_s: f64,
        workers: u32,
        service: Dist,
        #[serde(default = "default_backlog")]
        backlog: u32,
        /// A request's CPU on its worker as bursts and waits (shape.rs).
        #[serde(default)]
        shape: Option<Shape>,
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
            | WorkloadSpec::Bursty { name, .. }
            | WorkloadSpec::MemoryHog { name, .. }
            | WorkloadSpec::FileServer { name, .. }
            | WorkloadSpec::CacheWriter { name, .. }
            | WorkloadSpec::Analytics { name, .. }
            | WorkloadSpec::Duty { name, .. }
            | WorkloadSpec::Dd { name, .. }
            | WorkloadSpec::Database { name, .. }
            | WorkloadSpec::Iperf { name, .. } => name,
        }
    }
    /// What it has many of, by field (threads, clients, flows), and the threads it runs.
    pub fn sizes(&self) -> (Vec<(&'static str, u64)>, u64) {
        let n = |v: &u32| *v as u64;
        let one = |k, v: &u32| (vec![(k, n(v))], n(v));
        match self {
            WorkloadSpec::Hog { threads, .. }
            | WorkloadSpec::MemoryHog { threads, .. }
            | WorkloadSpec::CacheWriter { threads, .. }
            | WorkloadSpec::Analytics { threads, .. }
            | WorkloadSpec::Dd { threads, .. } => one("threads", threads),
            WorkloadSpec::Duty { max_threads, .. } => one("max_threads", max_threads),
            WorkloadSpec::FileServer { clients, .. } | WorkloadSpec::Database { clients, .. } => {
                one("clients", clients)
            }
            WorkloadSpec::OpenLoop { workers, .. } => one("workers", workers),
            WorkloadSpec::Iperf { streams, .. } => (vec![("streams", n(streams))], 0),
            WorkloadSpec::Bursty {
                steady_threads,
                burst_threads,
                ..
            } => (
                vec![
                    ("steady_threads", n(steady_threads)),
                    ("burst_threads", n(burst_threads)),
                ],
                n(steady_threads) + n(burst_threads),
            ),
            WorkloadSpec::ClosedLoop {
                clients,
                fanout,
                workers,
                client_cpu,
                client_threads,
                ..
            } => {
                // the generator's tasks (one per client, or its threads) when its CPU is modelled
                let generator = if client_cpu.is_some() {
                    n(&client_threads.unwrap_or(*clients))
                } else {
                    0
                };
                match workers {
                    Some(w) => (
                        vec![("clients", n(clients)), ("fanout", n(fanout)), ("workers", n(w))],
                        n(w) + generator,
                    ),
                    None => (
                        vec![("clients", n(clients)), ("fanout", n(fanout))],
                        n(clients) * n(fanout) + generator,
                    ),
                }
            }
        }
    }

    /// Workloads that allocate memory (or read files into the page cache).
    pub fn needs_memory(&self) -> bool {
        matches!(
            self,
            WorkloadSpec::MemoryHog { .. }
                | WorkloadSpec::FileServer { .. }
                | WorkloadSpec::CacheWriter { .. }
                | WorkloadSpec::Analytics { .. }
        )
    }

    pub fn cgroup(&self) -> &str {
        match self {
            WorkloadSpec::Hog { cgroup, .. }
            | WorkloadSpec::ClosedLoop { cgroup, .. }
            | WorkloadSpec::OpenLoop { cgroup, .. }
            | WorkloadSpec::Bursty { cgroup, .. }
            | WorkloadSpec::MemoryHog { cgroup, .. }
            | WorkloadSpec::FileServer { cgroup, .. }
            | WorkloadSpec::CacheWriter { cgroup, .. }
            | WorkloadSpec::Analytics { cgroup, .. }
            | WorkloadSpec::Duty { cgroup, .. }
            | WorkloadSpec::Dd { cgroup, .. }
            | WorkloadSpec::Database { cgroup, .. }
            | WorkloadSpec::Iperf { cgroup, .. } => cgroup,
        }
    }
}

/// The CPU a closed loop's message costs its receiver when the sender last ran on another
/// CPU: a request reaching a server thread (`server_ns`) or a reply reaching the client's
/// generator task (`client_ns`). On one CPU the socket's buffers and the sender's data are
/// still in its caches and the wakeup needs no interrupt to another CPU; across CPUs they
/// move, and in a guest every cross-CPU wakeup is an IPI that exits to the hypervisor. It is
/// the hardware's, not the scheduler's, so it is measured per service and host: the service
/// alone on its CPUs and on one CPU (replay/calibration.py `cross_cpu`). Measured on this
/// project's 2-CPU guest, redis-server + redis-benchmark: 4.5 + 6.7 µs a GET apart against
/// 2.5 + 3.7 µs on one CPU (docs/replay.md, "What an exchange across CPUs costs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossCpu {
    #[serde(default)]
    pub server_ns: u64,
    #[serde(default)]
    pub client_ns: u64,
}

/// A closed loop's generator as event loops (event_loop.rs): `read_share` of a request's
/// client CPU reads its reply, the rest writes the next request.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventLoopSpec {
    #[serde(default = "half")]
    pub read_share: f64,
    /// How the generator re-arms a connection for its next write, and so where that write
    /// stands in its next pass (event_loop.rs `Rearm`).
    #[serde(default)]
    pub rearm: crate::event_loop::Rearm,
}

fn half() -> f64 {
    0.5
}

/// How a closed loop's pool of workers takes its clients' requests (workload.rs `Pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dispatch {
    /// One FIFO queue: the first free worker takes the oldest request (a thread pool).
    #[default]
    Queue,
    /// Each client's connection belongs to one worker (drawn per seed), which alone serves
    /// its requests: an event-loop server's worker processes (nginx).
    Connection,
}

/// When a closed loop's pool workers write their replies (workload.rs `Pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replies {
    /// Each as its request is done (a thread per request, nginx's handlers).
    #[default]
    Each,
    /// At the end of each event-loop pass, every reply of the requests the pass found ready
    /// (redis-server's `beforeSleep` → `handleClientsWithPendingWrites`; workload.rs `Passes`).
    Pass,
}

/// How a closed loop's rounds between a client and the server go (shape.rs `Rounds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exchange {
    /// The client's part, then every server thread's, in turn: one side runs at a time.
    #[default]
    Alternate,
    /// After the first round (the request, then the server's first block) the client's part
    /// and the server threads' parts of each round run at once, and the next round starts
    /// when all of them are done: a result streamed over a socket, the client parsing one
    /// block while the server produces the next (ClickHouse's TCPHandler and
    /// clickhouse-benchmark: each runnable ~75–80% of the query, docs/replay.md).
    Stream,
}

/// cgroup v1 cpu.shares limits: MIN_SHARES = 2, MAX_SHARES = 2^18
/// (kernel-and-anchors.md §A2, `__sched_group_set_shares`).
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 1 << 18;

/// The knobs the simulated cgroups have, by their cgroup v1 file names.
pub const KNOBS: [&str; 28] = [
    "cpu.shares",
    "cpu.idle",
    "cpu.qos_level",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpu.cfs_burst_us",
    "cpuset.cpus",
    "cpuset.mems",
    "cgroup.kill",
    "memory.limit_in_bytes",
    "memory.high",
    "memory.low",
    "memory.min",
    "memory.oom.group",
    "memory.wmark_ratio",
    "memory.wmark_scale_factor",
    "memory.wmark_min_adj",
    "memory.priority",
    "memory.use_priority_oom",
    "memory.high_async_ratio",
    "blkio.weight",
    "blkio.cost.weight",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "net_cls.classid",
    "net.egress_bps",
];

/// Node-wide files, written on the root cgroup: iocost's (v2 io.cost.*, the v1 port's
/// blkio.cost.*) and oncn-bwm's /proc/qos/net_qos_* (rubik.md §4.4–4.5).
pub const ROOT_KNOBS: [&str; 5] = [
    "blkio.cost.model",
    "blkio.cost.qos",
    "net_qos_enable",
    "net_qos_waterline",
    "net_qos_bandwidth",
];

pub fn check_knob(field: &str, knob: &str, value: i64) -> Result<()> {
    let bad = |why: String| Err(SpecError::new(field, why));
    match knob {
        "cpu.shares" => {
            if value < MIN_SHARES as i64 || value > MAX_SHARES as i64 {
                return bad(format!(
                    "cpu.shares must be in {MIN_SHARES}..={MAX_SHARES} (got {value})"
                ));
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
                return bad(format!(
                    "cpu.qos_level must be -1 (offline) or 0 (online) (got {value})"
                ));
            }
        }
        // Ranges of these are checked together (they constrain each other) by bandwidth_ns.
        "cpu.cfs_quota_us" | "cpu.cfs_period_us" | "cpu.cfs_burst_us" => {}
        "cpuset.cpus" | "cpuset.mems" => return bad(format!("{knob} takes a list like \"0-3,6\", not a number")),
        "memory.limit_in_bytes" | "memory.high" => {
            if value < -1 {
                return bad(format!(
                    "{knob} must be a size in bytes, or -1 for no limit (got {value})"
                ));
            }
        }
        "memory.low" | "memory.min" => {
            if value < 0 {
                return bad(format!("{knob} must be a size in bytes >= 0 (got {value})"));
            }
        }
        "memory.oom.group" | "memory.use_priority_oom" => {
            if value != 0 && value != 1 {
                return bad(format!("{knob} must be 0 or 1 (got {value})"));
            }
        }
        "memory.wmark_ratio" => {
            if !(0..=100).contains(&value) {
                return bad(format!("memory.wmark_ratio must be in 0..=100 (got {value})"));
            }
        }
        "memory.wmark_scale_factor" => {
            if !(1..=1000).contains(&value) {
                return bad(format!("memory.wmark_scale_factor must be in 1..=1000 (got {value})"));
            }
        }
        "memory.wmark_min_adj" => {
            if !(-25..=50).contains(&value) {
                return bad(format!("memory.wmark_min_adj must be in -25..=50 (got {value})"));
            }
        }
        "memory.priority" => {
            if !(0..=12).contains(&value) {
                return bad(format!("memory.priority must be in 0..=12 (got {value})"));
            }
        }
        "memory.high_async_ratio" => {
            if !(11..=100).contains(&value) {
                return bad(format!("memory.high_async_ratio must be in 11..=100 (got {value})"));
            }
        }
        "blkio.weight" => {
            // bfq: BFQ_MIN_WEIGHT..=BFQ_MAX_WEIGHT (cfq took 10..=1000)
            if !(1..=1000).contains(&value) {
                return bad(format!("blkio.weight must be in 1..=1000 (got {value})"));
            }
        }
        "blkio.cost.weight" => {
            // CGROUP_WEIGHT_MIN..=CGROUP_WEIGHT_MAX (cgroup-v2.rst, io.weight)
            if !(1..=10000).contains(&value) {
                return bad(format!("blkio.cost.weight must be in 1..=10000 (got {value})"));
            }
        }
        "blkio.throttle.read_bps_device"
        | "blkio.throttle.write_bps_device"
        | "blkio.throttle.read_iops_device"
        | "blkio.throttle.write_iops_device"
        | "net.egress_bps" => {
            if value < 0 {
                return bad(format!("{knob} must be >= 0 (0: no limit) (got {value})"));
            }
        }
        "net_cls.classid" => {
            if !(0..=u32::MAX as i64).contains(&value) {
                return bad(format!(
                    "net_cls.classid must be a 32-bit class id, 0..=4294967295 (got {value})"
                ));
            }
        }
        _ => return bad(format!("unknown knob {knob:?} (known: {})", KNOBS.join(", "))),
    }
    Ok(())
}

impl NodeSpec {
    pub fn from_json(text: &str) -> Result<NodeSpec> {
        let spec: NodeSpec = serde_json::from_str(text).map_err(|e| SpecError::new("", format!("core spec: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn validate(&self) -> Result<()> {
        let names: Vec<String> = self.workloads.iter().map(|w| w.name().to_string()).collect();
        crate::contention::validate(&self.hardware, &names)?;
        if let Some(s) = &self.steal {
            s.validate("steal")?;
        }
        if let Some(c) = &self.cpuidle {
            c.validate("cpuidle")?;
        }
        if let Some(d) = &self.disk {
            d.device().check("disk")?;
        }
        if let Some(n) = &self.network {
            if n.egress_bytes_per_s == 0 {
                return Err(SpecError::new("network.egress_bytes_per_s", "must be > 0"));
            }
        }
        self.kernel.features()?;
        let (dirty, background) = self.kernel.dirty_ratios();
        if !(1..=100).contains(&dirty) {
            return Err(SpecError::new(
                "kernel.dirty_ratio",
                format!("must be in 1..=100 (got {dirty})"),
            ));
        }
        if background >= dirty {
            return Err(SpecError::new(
                "kernel.dirty_background_ratio",
                format!("must be below dirty_ratio ({dirty}) (got {background})"),
            ));
        }
        if let Some(m) = &self.memory {
            if m.total_bytes < 16 * crate::memcg::PAGE {
                return Err(SpecError::new(
                    "memory.total_bytes",
                    format!("must be at least 16 pages (got {})", m.total_bytes),
                ));
            }
        }
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
        if t.threads_per_core > MAX_SMT {
            return Err(SpecError::new(
                "topology.threads_per_core",
                format!("at most {MAX_SMT} (SMT8, POWER) (got {})", t.threads_per_core),
            ));
        }
        let ncpus = t.sockets as u64 * t.cores_per_socket as u64 * t.threads_per_core as u64;
        if ncpus > NR_CPUS {
            return Err(SpecError::new(
                "topology",
                format!(
                    "{} sockets × {} cores × {} threads = {ncpus} logical CPUs; at most {NR_CPUS} (NR_CPUS)",
                    t.sockets, t.cores_per_socket, t.threads_per_core
                ),
            ));
        }
        let nnodes = t.sockets as u64 * t.numa_nodes_per_socket as u64;
        if nnodes > MAX_NUMNODES {
            return Err(SpecError::new(
                "topology.numa_nodes_per_socket",
                format!(
                    "{} sockets × {} = {nnodes} NUMA nodes; at most {MAX_NUMNODES} (MAX_NUMNODES)",
                    t.sockets, t.numa_nodes_per_socket
                ),
            ));
        }
        if !t.cores_per_socket.is_multiple_of(t.numa_nodes_per_socket) {
            return Err(SpecError::new(
                "topology.numa_nodes_per_socket",
                format!("must divide cores_per_socket ({})", t.cores_per_socket),
            ));
        }
        if !(t.smt_speed > 0.0 && t.smt_speed <= 1.0) {
            return Err(SpecError::new(
                "topology.smt_speed",
                format!("must be in (0, 1] (got {})", t.smt_speed),
            ));
        }
        if !(t.numa_remote_speed > 0.0 && t.numa_remote_speed <= 1.0) {
            return Err(SpecError::new(
                "topology.numa_remote_speed",
                format!("must be in (0, 1] (got {})", t.numa_remote_speed),
            ));
        }
        if let Some(phase) = self.kernel.cfs_period_phase_ns {
            if phase >= crate::bandwidth::MAX_CFS_QUOTA_PERIOD {
                return Err(SpecError::new(
                    "kernel.cfs_period_phase_ns",
                    format!("must be below 1 s, the longest cpu.cfs_period_us (got {phase} ns)"),
                ));
            }
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
                return Err(SpecError::new(
                    f("name"),
                    format!("cgroup {:?} declared twice", cg.name),
                ));
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
                return Err(SpecError::new(
                    f("parent"),
                    format!("nesting deeper than {} levels", crate::cfs::MAX_DEPTH - 1),
                ));
            }
            check_knob(&f("cpu.shares"), "cpu.shares", cg.shares as i64)?;
            check_knob(&f("cpu.idle"), "cpu.idle", cg.idle)?;
            check_knob(&f("cpu.qos_level"), "cpu.qos_level", cg.qos_level)?;
            bandwidth_ns(
                &f("cpu.cfs_quota_us"),
                cg.cfs_quota_us,
                cg.cfs_period_us,
                cg.cfs_burst_us,
            )?;
            for (k, v) in [
                ("memory.limit_in_bytes", cg.memory_max),
                ("memory.high", cg.memory_high),
                ("memory.low", cg.memory_low),
                ("memory.min", cg.memory_min),
                ("memory.oom.group", cg.memory_oom_group),
            ] {
                check_knob(&f(k), k, v)?;
            }
            for (k, v) in cg.io_knobs() {
                check_knob(&f(k), k, v)?;
            }
            if cg.memory_max >= 0 && cg.memory_high > cg.memory_max {
                return Err(SpecError::new(
                    f("memory.high"),
                    format!(
                        "must not be above memory.limit_in_bytes ({}) (got {})",
                        cg.memory_max, cg.memory_high
                    ),
                ));
            }
            names.push(&cg.name);
        }
        let mut wl_names: Vec<&str> = vec![];
        let mut tasks = 0u64;
        for (i, w) in self.workloads.iter().enumerate() {
            let f = |k: &str| format!("workloads[{i}].{k}");
            let (sizes, n) = w.sizes();
            for (k, v) in sizes {
                if v > PID_MAX_LIMIT {
                    return Err(SpecError::new(
                        f(k),
                        format!("at most {PID_MAX_LIMIT} (PID_MAX_LIMIT, the most tasks a kernel has) (got {v})"),
                    ));
                }
            }
            tasks += n;
            if tasks > PID_MAX_LIMIT {
                return Err(SpecError::new(
                    "workloads",
                    format!(
                        "{tasks} threads by workloads[{i}] ({:?}); at most {PID_MAX_LIMIT} on a node (PID_MAX_LIMIT)",
                        w.name()
                    ),
                ));
            }
            if wl_names.contains(&w.name()) {
                return Err(SpecError::new(
                    f("name"),
                    format!("workload {:?} declared twice", w.name()),
                ));
            }
            wl_names.push(w.name());
            if !names.contains(&w.cgroup()) {
                return Err(SpecError::new(
                    f("cgroup"),
                    format!("no cgroup named {:?} (declared: {})", w.cgroup(), names[1..].join(", ")),
                ));
            }
            if w.needs_memory() && self.memory.is_none() {
                return Err(SpecError::new(
                    f("kind"),
                    "a memory workload needs the node's memory (memory.total_bytes)",
                ));
            }
            if matches!(w, WorkloadSpec::Dd { .. } | WorkloadSpec::Database { .. }) && self.disk.is_none() {
                return Err(SpecError::new(
                    f("kind"),
                    "an IO workload needs the node's disk ([disk])",
                ));
            }
            if matches!(w, WorkloadSpec::Iperf { .. }) && self.network.is_none() {
                return Err(SpecError::new(
                    f("kind"),
                    "a network workload needs the node's link ([network] egress_bytes_per_s)",
                ));
            }
            match w {
                WorkloadSpec::Hog { .. } => {}
                WorkloadSpec::Dd {
                    block_bytes,
                    bytes,
                    threads,
                    ..
                } => {
                    if *threads == 0 {
                        return Err(SpecError::new(f("threads"), "must be >= 1"));
                    }
                    if *block_bytes < 512 {
                        return Err(SpecError::new(
                            f("block_bytes"),
                            format!("must be at least a sector (512 bytes) (got {block_bytes})"),
                        ));
                    }
                    if *bytes == Some(0) {
                        return Err(SpecError::new(f("bytes"), "must be > 0 (omit it to run forever)"));
                    }
                }
                WorkloadSpec::Database {
                    clients,
                    read_bytes,
                    service,
                    think,
                    ..
                } => {
                    if *clients == 0 {
                        return Err(SpecError::new(f("clients"), "must be >= 1"));
                    }
                    if *read_bytes < 512 {
                        return Err(SpecError::new(
                            f("read_bytes"),
                            format!("must be at least a sector (512 bytes) (got {read_bytes})"),
                        ));
                    }
                    service.validate(&f("service"))?;
                    if let Some(t) = think {
                        t.validate(&f("think"))?;
                    }
                }
                WorkloadSpec::Iperf {
                    streams, windows_ns, ..
                } => {
                    if *streams == 0 {
                        return Err(SpecError::new(f("streams"), "must be >= 1"));
                    }
                    for (k, [a, b]) in windows_ns.iter().enumerate() {
                        if a >= b {
                            return Err(SpecError::new(
                                f(&format!("windows_ns[{k}]")),
                                format!("start {a} must be before stop {b}"),
                            ));
                        }
                    }
                }
                WorkloadSpec::ClosedLoop {
                    clients,
                    fanout,
                    service,
                    think,
                    workers,
                    dispatch,
                    replies,
                    shape,
                    client_cpu,
                    delay,
                    rounds,
                    exchange,
                    client_threads,
                    event_loop,
                    ..
                } => {
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
                        return Err(SpecError::new(
                            f("workers"),
                            "a worker pool serves requests of fanout 1",
                        ));
                    }
                    if workers.is_none() && *dispatch != Dispatch::Queue {
                        return Err(SpecError::new(
                            f("dispatch"),
                            "dispatches to a pool's workers: needs workers",
                        ));
                    }
                    if workers.is_none() && *replies != Replies::Each {
                        return Err(SpecError::new(f("replies"), "a pool's workers' replies: needs workers"));
                    }
                    service.validate(&f("service"))?;
                    if let Some(t) = think {
                        t.validate(&f("think"))?;
                    }
                    if let Some(s) = shape {
                        s.validate(&f("shape"))?;
                    }
                    if let Some(c) = client_cpu {
                        c.validate(&f("client_cpu"))?;
                    }
                    if let Some(d) = delay {
                        d.validate(&f("delay"))?;
                    }
                    if let Some(r) = *rounds {
                        validate_rounds(r, client_cpu, workers, shape).map_err(|e| SpecError::new(f("rounds"), e))?;
                    }
                    if let Some(g) = *client_threads {
                        if g == 0 {
                            return Err(SpecError::new(f("client_threads"), "must be >= 1"));
                        }
                    }
                    if *exchange == Exchange::Stream && client_threads.is_some() {
                        // (the client's task runs on into its next part: no pool in between)
                        return Err(SpecError::new(
                            f("exchange"),
                            "a streamed exchange needs a generator task per client (no client_threads)",
                        ));
                    }
                    if let Some(ev) = event_loop {
                        // (without client_cpu the clients run no task: the loop is not on the node)
                        let why = if client_cpu.is_some() && client_threads.is_none() {
                            Some("an event loop needs client_threads (its threads)")
                        } else if !matches!(think, None | Some(Dist::Constant { value_ns: 0 })) {
                            Some("an event loop writes the next request at once: no think time")
                        } else if rounds.unwrap_or(1) > 1 {
                            Some("an event loop runs one round a request")
                        } else if !(0.0..=1.0).contains(&ev.read_share) {
                            Some("read_share must be within 0..1")
                        } else {
                            None
                        };
                        if let Some(why) = why {
                            return Err(SpecError::new(f("event_loop"), why));
                        }
                    }
                }
                WorkloadSpec::Bursty {
                    burst_threads,
                    every_ns,
                    length_ns,
                    ..
                } => {
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
                WorkloadSpec::MemoryHog {
                    threads,
                    bytes,
                    chunk_bytes,
                    oom_score_adj,
                    mode,
                    hang_ns,
                    ..
                } => {
                    if *threads == 0 {
                        return Err(SpecError::new(f("threads"), "must be >= 1"));
                    }
                    if *bytes == 0 {
                        return Err(SpecError::new(f("bytes"), "must be > 0"));
                    }
                    if *chunk_bytes < crate::memcg::PAGE {
                        return Err(SpecError::new(
                            f("chunk_bytes"),
                            format!("must be at least a page ({} bytes)", crate::memcg::PAGE),
                        ));
                    }
                    if !(-1000..=1000).contains(oom_score_adj) {
                        return Err(SpecError::new(
                            f("oom_score_adj"),
                            format!("must be in -1000..=1000 (got {oom_score_adj})"),
                        ));
                    }
                    if *mode == HogMode::Hang && *hang_ns == 0 {
                        return Err(SpecError::new(f("hang_ns"), "mode hang needs hang_ns > 0"));
                    }
                }
                WorkloadSpec::FileServer {
                    clients,
                    service,
                    think,
                    working_set_bytes,
                    file_bytes,
                    disk_bytes_per_s,
                    ..
                } => {
                    if *clients == 0 {
                        return Err(SpecError::new(f("clients"), "must be >= 1"));
                    }
                    if *file_bytes == 0 || *working_set_bytes < *file_bytes {
                        return Err(SpecError::new(
                            f("working_set_bytes"),
                            format!(
                                "must hold at least one file of file_bytes ({file_bytes}) (got {working_set_bytes})"
                            ),
                        ));
                    }
                    if *disk_bytes_per_s == 0 {
                        return Err(SpecError::new(f("disk_bytes_per_s"), "must be > 0"));
                    }
                    service.validate(&f("service"))?;
                    if let Some(t) = think {
                        t.validate(&f("think"))?;
                    }
                }
                WorkloadSpec::Analytics {
                    threads,
                    working_set_bytes,
                    work_ns,
                    fault_penalty,
                    ..
                } => {
                    if *threads == 0 {
                        return Err(SpecError::new(f("threads"), "must be >= 1"));
                    }
                    if *working_set_bytes < *threads as u64 * crate::memcg::PAGE {
                        return Err(SpecError::new(
                            f("working_set_bytes"),
                            "must be at least a page per thread",
                        ));
                    }
                    if *work_ns == 0 {
                        return Err(SpecError::new(f("work_ns"), "must be > 0"));
                    }
                    if !(fault_penalty.is_finite() && *fault_penalty >= 0.0) {
                        return Err(SpecError::new(
                            f("fault_penalty"),
                            format!("must be >= 0 (got {fault_penalty})"),
                        ));
                    }
                }
                WorkloadSpec::Duty {
                    max_threads,
                    cores,
                    period_ns,
                    ..
                } => {
                    if *max_threads == 0 {
                        return Err(SpecError::new(f("max_threads"), "must be >= 1"));
                    }
                    if !(cores.is_finite() && *cores >= 0.0 && *cores <= *max_threads as f64) {
                        return Err(SpecError::new(
                            f("cores"),
                            format!("must be in [0, max_threads = {max_threads}] (got {cores})"),
                        ));
                    }
                    if *period_ns < 1000 {
                        return Err(SpecError::new(f("period_ns"), "must be at least 1 µs"));
                    }
                }
                WorkloadSpec::CacheWriter {
                    threads, chunk_bytes, ..
                } => {
                    if *threads == 0 {
                        return Err(SpecError::new(f("threads"), "must be >= 1"));
                    }
                    if *chunk_bytes < crate::memcg::PAGE {
                        return Err(SpecError::new(
                            f("chunk_bytes"),
                            format!("must be at least a page ({} bytes)", crate::memcg::PAGE),
                        ));
                    }
                }
                WorkloadSpec::OpenLoop {
                    rate_per_s,
                    workers,
                    service,
                    backlog,
                    shape,
                    ..
                } => {
                    if *backlog > MAX_BACKLOG {
                        return Err(SpecError::new(
                            f("backlog"),
                            format!("at most {MAX_BACKLOG} waiting requests (got {backlog})"),
                        ));
                    }
                    if !(rate_per_s.is_finite() && *rate_per_s > 0.0) {
                        return Err(SpecError::new(
                            f("rate_per_s"),
                            format!("must be > 0 (got {rate_per_s})"),
                        ));
                    }
                    if *workers == 0 {
                        return Err(SpecError::new(f("workers"), "must be >= 1"));
                    }
                    service.validate(&f("service"))?;
                    if let Some(s) = shape {
                        s.validate(&f("shape"))?;
                    }
                }
            }
        }
        crate::slice::check_slices(self)?;
        crate::autogroup::check_sessions(self)
    }
}

/// `rounds` of a closed loop: a count, and (above one) only where its parts are defined — the
/// client's CPU to split, a thread per client (a pool worker may serve another client between
/// rounds) and no shape of its own (a round is the server's wait already).
fn validate_rounds(
    rounds: u32,
    client_cpu: &Option<Dist>,
    workers: &Option<u32>,
    shape: &Option<Shape>,
) -> std::result::Result<(), String> {
    if !(1..=crate::shape::MAX_ROUNDS).contains(&rounds) {
        return Err(format!("must be in 1..={} (got {rounds})", crate::shape::MAX_ROUNDS));
    }
    if rounds == 1 {
        return Ok(());
    }
    if client_cpu.is_none() {
        return Err("rounds > 1 split the client's CPU: set client_cpu too".into());
    }
    if workers.is_some() {
        return Err("rounds > 1 need a thread per client (no workers)".into());
    }
    if shape.as_ref().is_some_and(|s| s.bursts > 1) {
        return Err("rounds > 1 are the server's bursts already: drop shape, or set rounds = 1".into());
    }
    Ok(())
}
