"""Typed contract of the Rust extension `sim._core` (built from core_rs/py).

The boundary is coarse: Python describes a node once (a JSON document, the "core spec"),
then advances it with `run_until` and reads knobs, stats and results.  No Python call is
made per simulated event.  Every error caused by input arrives as `ValueError` (or
`KeyError` for an unknown name) whose message names the bad field; a Rust panic never
crosses the boundary (it is turned into `RuntimeError` naming it an internal bug).

Times are integer nanoseconds.  Arrays are returned as little-endian `bytes` of u64/f64
so that Python wraps them with `numpy.frombuffer` without copying element by element.

Core spec (JSON object passed to `Node`):

    {
      "seed": 1,                                   # u64
      "topology": {
        "sockets": 1, "numa_nodes_per_socket": 1,
        "cores_per_socket": 8, "threads_per_core": 1,   # logical CPUs = product
        "smt_speed": 0.6,                          # per-thread speed when both siblings run
        "numa_remote_speed": 0.75,                 # speed with memory on another NUMA node
        "siblings": null                           # or [[0, 4], [1, 5], ...]: logical ids
      },                                           #   sharing a core (default: Linux order,
                                                   #   cpu c and c + ncores are siblings)
      "kernel": {                                  # every field optional; None = kernel default
        "scheduler": "cfs",                        #   scaled by 1 + ilog2(min(ncpus, 8))
        "hz": 250,
        "sched_latency_ns": null, "sched_min_granularity_ns": null,
        "sched_wakeup_granularity_ns": null, "sched_idle_min_granularity_ns": null,
        "smt_expeller": false,                     # openEuler: offline stays off the SMT
                                                   #   sibling of a CPU running online work
        "cfs_period_phase_ns": null,               # every CFS period timer's boundaries at
                                                   #   this + k * period (< 1 s); null: each
                                                   #   group's own, drawn from the seed
        "autogroup": false,                        # kernel.sched_autogroup_enabled: a root
        "autogroup_sessions": {"a": "s", "b": "s"},#   ("") workload runs in its session's
                                                   #   group (its own unless named here),
                                                   #   reported as the root's
        "sched_runtime_ns": {"web": 300000},       # EEVDF custom slices by workload (6.12+,
                                                   #   0.1-100 ms; 0 = base_slice)
        "cpu_clock_readers": ["web"]               # workloads whose threads read their own
      },                                           #   CPU clock: exact slice ends (EEVDF)
      "cgroups": [                                 # parents before children; "" is the root
        {"name": "online", "parent": "", "cpu.shares": 1024, "cpu.idle": 0,
         "cpu.qos_level": 0, "cpu.cfs_quota_us": -1, "cpu.cfs_period_us": 100000,
         "cpu.cfs_burst_us": 0, "cpuset.cpus": "0-7", "cpuset.mems": "0",
         "memory.limit_in_bytes": -1, "memory.high": -1,   # bytes, -1 = no limit
         "memory.low": 0, "memory.min": 0, "memory.oom.group": 0,
         "blkio.weight": 100, "blkio.cost.weight": 100,   # bfq/cfq and iocost weights
         "blkio.throttle.read_bps_device": 0,             # blk-throttle, 0 = none (also
         "blkio.throttle.write_bps_device": 0,            #   *_iops_device)
         "net_cls.classid": 0,                            # 4294967295: offline for oncn-bwm
         "net.egress_bps": 0}                             # a tc rate, 0 = none
                                                   # cpuset.* optional: default the parent's
      ],
      "workloads": [
        {"kind": "hog", "name": "stress", "cgroup": "offline", "threads": 10,
         "start_ns": 0},
        {"kind": "closed_loop", "name": "ch", "cgroup": "online", "clients": 10,
         "fanout": 8, "think": {"dist": "constant", "value_ns": 0},
         "service": {"dist": "lognormal", "mean_ns": 48000000, "sigma": 0.4},
         "workers": null,                          # or N: a pool of N threads serves the
                                                   #   clients' requests (fanout 1)
         "shape": {"bursts": 4,                    # optional: each thread's CPU of a request
                   "wait": {"dist": "exponential", #   in 4 equal bursts, asleep a `wait`
                            "mean_ns": 1000000}},  #   draw between two (shape.rs)
         "start_ns": 0},
        {"kind": "open_loop", "name": "web", "cgroup": "online", "rate_per_s": 5000.0,
         "workers": 48, "service": {"dist": "exponential", "mean_ns": 1000000},
         "backlog": 4096, "start_ns": 0},          # requests that may wait (somaxconn);
                                                   #   arrivals beyond are dropped; "shape"
                                                   #   as a closed loop's
        {"kind": "bursty", "name": "spiky", "cgroup": "online", "steady_threads": 1,
         "burst_threads": 2, "every_ns": 10000000000, "length_ns": 500000000,
         "start_ns": 0},                           # a spell = a request; its latency is
                                                   #   how long the burst took
        {"kind": "memory_hog", "name": "vm", "cgroup": "offline", "threads": 2,
         "bytes": 1073741824, "chunk_bytes": 1048576, "touch_ns_per_page": 800,
         "mode": "keep", "hang_ns": 0, "oom_score_adj": 0, "start_ns": 0}
                                                   # stress --vm: keep | hang | churn
        {"kind": "dd", "name": "w", "cgroup": "offline", "op": "write", "direct": true,
         "block_bytes": 1048576, "bytes": null, "threads": 1, "random": false,
         "cpu_ns_per_block": null, "start_ns": 0},  # a block = a request
        {"kind": "database", "name": "db", "cgroup": "online", "clients": 8, "reads": 4,
         "read_bytes": 4096, "service": {...}, "think": null, "start_ns": 0},
        {"kind": "iperf", "name": "i", "cgroup": "offline", "streams": 1,
         "rate_bytes_per_s": 0, "windows_ns": [[0, 10000000000]], "start_ns": 0}
      ],
      "sample_interval_ns": 100000000,              # 0 = no time series
      "memory": {"total_bytes": 68719476736,        # or null: memory not modelled
                 "swap_bytes": 0, "reclaim_ns_per_page": 1000,
                 "watermark_scale_factor": 10},
      "disk": {"rbps": 550000000, "rseqiops": 130000, "rrandiops": 90000,  # or null
               "wbps": 500000000, "wseqiops": 120000, "wrandiops": 80000,
               "latency_ns": 80000, "scheduler": "mq-deadline"},  # none|kyber|bfq|cfq
      "network": {"egress_bytes_per_s": 1250000000},  # or null
      "hardware": {                                 # optional (contention.rs): shared hardware
        "ghz": 2.5,                                 #   cycles = CPU time x GHz
        "llc": {"size_bytes": null,                 #   per socket; null: 1.375 MiB a core
                "ways": 11, "min_cbm_bits": 1, "num_closids": 16},
        "memory_bandwidth": {"peak_bytes_per_s": 1e11, "idle_latency_ns": 90.0,
                             "queue_factor": 0.25,  #   latency L0 (1 + k u / (1 - u))
                             "max_utilisation": 0.95},
        "profiles": {"web": {"cpi_base": 1.0, "llc_apki": 5.0,  # workload name -> profile;
                             "footprint_bytes": 4194304,         #   none: today's speeds
                             "miss_exponent": 1.0, "mlp": 1.0, "core_pressure": null}},
        "resctrl": [{"name": "be", "schemata": "L3:0=7;1=7\nMB:0=30;1=30",
                     "cgroups": ["offline"]}],
        "refresh_ns": null                          #   co-runners' speeds follow a change
      }                                             #   within this (null: a tick; 0: at once)
    }
    # kernel also takes "dirty_ratio", "dirty_background_ratio", "cgroup_writeback".
    # Node-wide files are written on the root "": blkio.cost.model, blkio.cost.qos (text as
    # the kernel's io.cost.* take it), net_qos_enable, net_qos_waterline, net_qos_bandwidth.

    Distributions ("dist"):
      {"dist": "constant", "value_ns": N}
      {"dist": "exponential", "mean_ns": N}
      {"dist": "lognormal", "mean_ns": N, "sigma": S}      # sigma of the underlying normal
      {"dist": "empirical", "edges_ns": [e0, ..., en], "weights": [w1, ..., wn]}
                                                    # a histogram: pick a bin by weight,
                                                    # then uniform inside it
"""

from typing import Self, final

__all__ = ["SCHED_FEATURES", "Node", "__version__", "load_main"]
__version__: str
# [kernel] sched_features names the core takes: the ones it models, then known ones it ignores
SCHED_FEATURES: list[str]

def load_main(argv: list[str]) -> int:
    """colosim-load (core_rs/load) in this process, GIL released: `argv` as the binary gets
    it, program name first; returns its exit status when the run ends (at --duration-ns,
    the result written)."""

@final
class Node:
    def __new__(cls, spec_json: str) -> Self: ...
    def run_until(self, t_ns: int) -> None:
        """Advance simulated time to exactly t_ns (must be >= now). ValueError when the run
        would keep more than 1 GiB of sampled series (checked before it runs) or of latency
        records (checked as it runs; the node stops where it was)."""
    def now(self) -> int: ...
    @property
    def ncpus(self) -> int: ...
    def cpu_topology(self) -> list[tuple[int, int, int]]:
        """Per logical CPU: (core id, socket, NUMA node)."""
    def cgroup_names(self) -> list[str]:
        """Index order of every per-cgroup array; index 0 is the root ""."""
    def service_names(self) -> list[str]:
        """closed_loop and open_loop workloads, in spec order."""
    def write(self, cgroup: str, knob: str, value: int | str) -> None:
        """Write a knob by its kernel file name (cgroup v1) and as its file takes it:
        "cpu.shares", "cpu.idle", "cpu.qos_level", "cpu.cfs_quota_us" (-1 = no limit),
        "cpu.cfs_period_us", "cpu.cfs_burst_us" (ints); "cpuset.cpus", "cpuset.mems" (lists
        like "0-3,6"); "cgroup.kill" (1: every task of the subtree dies and its workloads
        stop). Shrinking cpuset.cpus moves the tasks off the CPUs it lost."""
    def set_workload(self, name: str, key: str, value: float) -> None:
        """Change a running workload's demand: a duty workload's "cores" or "memory_bytes", an
        open loop's "rate_per_s" (what a trace player sets as the run goes)."""
    def read(self, cgroup: str, knob: str) -> int | str:
        """A knob as its file shows it: int for cpu.*, text for cpuset.* and for
        "cpu.pressure" ("some avg10=… avg60=… avg300=… total=<µs>\nfull …"; the root ""
        gives the node's /proc/pressure/cpu; "memory.pressure" likewise)."""
    def reset_stats(self) -> None:
        """Zero every counter and latency record (used at the end of warm-up)."""
    def runqlat(self, cgroup: str) -> list[int]:
        """Wake-to-run delays of the cgroup's tasks since the last reset (hierarchical), as BCC's
        runqlat buckets them: index = bit length of the delay in whole µs (0: under 1 µs;
        k: [2^(k-1), 2^k) µs); 24 buckets, the last open-ended."""
    def run_segments(self, cgroup: str) -> dict[str, list[int]]:
        """The cgroup's run segments since the last reset (hierarchical), in runqlat's buckets:
        "preempted" (a switch in to a switch out with the task still runnable), "blocked" (to a
        switch out asleep) and "preempted_wait" (a preempted task's wait until it ran again)."""
    def runnable_time(self, cgroup: str) -> list[list[int]]:
        """Per CPU, ns since the last reset the cgroup had k of its tasks (descendants'
        included) runnable there, k = 0 … 15 (the last: that many or more)."""
    def cgroup_stats(self, cgroup: str) -> dict[str, int]:
        """{"usage_ns" (hierarchical, like cpuacct.usage), "wait_ns" (run-queue wait of its
        tasks, hierarchical), "nr_switches" (hierarchical), "nr_migrations" (times its tasks
        changed CPU, hierarchical), "nr_running", "nr_tasks", and the
        group's own cpu.stat: "nr_periods", "nr_throttled", "throttled_time" (ns, summed over
        CPUs), "nr_bursts", "burst_time" (ns), and cpu.pressure stall totals "psi_some_ns",
        "psi_full_ns"} — all since the last reset; with the node's memory modelled also
        "memory_current", "memory_anon", "memory_file", "memory_swap", "memory_peak" (bytes)
        and "memory_events_low/high/max/oom/oom_kill" (cumulative, hierarchical), and
        "memory_psi_some_ns", "memory_psi_full_ns" (memory.pressure since the last reset); with
        a disk "io_read_bytes", "io_write_bytes", "io_read_ios", "io_write_ios", "io_wait_ns"
        (submission to completion), with a link "net_tx_bytes" (since the last reset)."""
    def memory_stats(self) -> dict[str, int] | None:
        """{"total", "free", "available" (MemAvailable), "swap_total" (bytes), "global_ooms"};
        None without node memory."""
    def oom_kills(self) -> dict[str, int]:
        """Tasks each workload lost to the OOM killer, by workload name."""
    def workload_usage(self, name: str) -> int:
        """CPU ns of a workload's tasks since time 0, wherever they run (a root workload's
        autogroup is reported as the root: this is its own figure); KeyError if no such workload."""
    def service_stats(self, name: str) -> dict[str, int]:
        """{"started", "completed", "dropped"} since the last reset: requests accepted,
        requests served, and an open loop's arrivals refused because its backlog was full."""
    def service_latencies(self, name: str) -> bytes:
        """u64 latency of every completed request since the last reset, in completion order."""
    def service_completions(self, name: str) -> bytes:
        """u64 completion time of every completed request since the last reset."""
    def cpu_busy(self) -> bytes:
        """u64 matrix ncpus x ncgroups (row-major): ns each CPU ran tasks of each (leaf) cgroup;
        autogroups' tasks count to the root's column."""
    def timeseries(self) -> dict[str, bytes]:
        """{"t_ns": bytes u64 [n], "usage_ns": bytes u64 [n x ncgroups] cumulative hierarchical
        usage, "completed": bytes u64 [n x nservices] cumulative completions, "nr_throttled"
        and "throttled_ns": bytes u64 [n x ncgroups] cumulative cpu.stat counters,
        "memory_bytes": bytes u64 [n x ncgroups] memory.current (empty without memory),
        "io_bytes" and "net_bytes": bytes u64 [n x ncgroups] cumulative bytes read + written on
        the disk and sent on the link by each subtree (empty without a disk / a link)}; samples
        every sample_interval_ns since time 0 (not reset by reset_stats)."""
    def events(self) -> int:
        """Events processed so far (for benchmarks)."""
    def resctrl_info(self) -> dict[str, object]:
        """/sys/fs/resctrl/info: {"cbm_mask": "7ff", "min_cbm_bits", "num_closids",
        "bandwidth_gran", "min_bandwidth", "l3_domains": [0, 1], "llc_bytes" (per domain)}."""
    def resctrl_write(self, group: str, schemata: str) -> None:
        """Write a group's schemata ("L3:0=7ff;1=3f\nMB:0=100;1=30"; unnamed domains keep
        their value), creating the group if absent ("" is the root group). ValueError naming
        the group, resource and rule for text the kernel refuses (non-contiguous or too short
        CBM, MB out of [min_bandwidth, 100]; MB is rounded up to bandwidth_gran) and "no free
        CLOSID" beyond num_closids groups."""
    def resctrl_read_schemata(self, group: str) -> str:
        """The schemata as the kernel prints it: "L3:0=7ff;1=7ff\nMB:0=100;1=100"."""
    def resctrl_assign(self, group: str, cgroup: str) -> None:
        """Every task of the cgroup subtree, present and future, joins the group (the
        assignment made last wins). KeyError for an unknown group or cgroup."""
    def resctrl_remove(self, group: str) -> None:
        """rmdir: its tasks return to the root group."""
    def resctrl_groups(self) -> list[str]:
        """Groups in CLOSID order, the root "" first."""
    def resctrl_mon(self, group: str) -> dict[int, dict[str, int]]:
        """mon_data per L3 domain: {"llc_occupancy": bytes now, "mbm_total_bytes",
        "mbm_local_bytes": cumulative bytes} (0 for work without a contention profile)."""
    def perf_counters(self, cgroup: str) -> dict[str, int]:
        """Cumulative over the cgroup subtree since time 0: {"cycles", "instructions",
        "cache-references", "cache-misses"} (LLC references and misses); without a profile
        instructions = cycles (CPI 1) and no references or misses."""
