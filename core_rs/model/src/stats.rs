//! Counters the core keeps: per cgroup (like cpuacct.usage and the scheduler's wait and switch
//! counts), per CPU by cgroup, per service (every latency, exactly), and the sampled series.

use crate::events::Ns;

#[derive(Debug, Clone, Default)]
pub struct CgroupStats {
    /// CPU time its own tasks ran (not including children; hierarchy is summed on read).
    pub usage_ns: u64,
    /// Time its tasks spent runnable but waiting for a CPU.
    pub wait_ns: u64,
    /// Times one of its tasks was switched out for another task or for idle.
    pub nr_switches: u64,
    /// Times one of its tasks changed CPU (`set_task_cpu` → se.nr_migrations: a wakeup
    /// placed elsewhere than its last CPU, balancing, a cpuset change; not fork placement).
    pub nr_migrations: u64,
    /// Wake-to-run delays of its tasks (a wakeup or a new task's first wakeup until it got a
    /// CPU), counted as BCC's runqlat counts them: bucket = the bit length of the delay in
    /// whole µs (0: under 1 µs; k: [2^(k−1), 2^k) µs), the last bucket open-ended.
    pub runqlat: [u64; RUNQLAT_BUCKETS],
    /// Its tasks' run segments (a switch in to the switch out, as sched_switch delimits them),
    /// same buckets: those that ended with the task still runnable (preempted: a slice's end,
    /// a wakeup's preemption, a move off the CPU) ...
    pub run_preempted: [u64; RUNQLAT_BUCKETS],
    /// ... and those that ended with it asleep (it blocked, or finished).
    pub run_blocked: [u64; RUNQLAT_BUCKETS],
    /// How long a preempted task waited until it ran again: the run-queue latency BCC's
    /// runqlat counts beside the wakeups' (which `runqlat` holds alone).
    pub preempted_wait: [u64; RUNQLAT_BUCKETS],
}

/// Buckets of `CgroupStats::runqlat`: up to 2^22 µs (4.2 s), then one open-ended.
pub const RUNQLAT_BUCKETS: usize = 24;

/// The `runqlat` bucket of a delay of `ns`.
pub fn runqlat_bucket(ns: Ns) -> usize {
    let us = ns / 1_000;
    ((u64::BITS - us.leading_zeros()) as usize).min(RUNQLAT_BUCKETS - 1)
}

#[derive(Debug, Clone, Default)]
pub struct ServiceStats {
    pub started: u64,
    pub completed: u64,
    /// Requests refused: an open loop's arrivals that found its backlog full.
    pub dropped: u64,
    /// Latency of each completed request (ns), in completion order: exact, not bucketed.
    pub latencies: Vec<Ns>,
    pub completions: Vec<Ns>,
    /// Completions since time 0, kept across resets (the time series uses it).
    pub total_completed: u64,
    /// A file server's requests that found their file in the page cache, and those that
    /// waited for the disk (0 for other kinds).
    pub hits: u64,
    pub misses: u64,
    /// A closed loop's messages with a `cross_cpu` cost (requests and replies), and those of
    /// them whose receiver ran on another CPU than their sender.
    pub exchanges: u64,
    pub crossed: u64,
}

impl ServiceStats {
    pub fn record(&mut self, now: Ns, latency: Ns) {
        self.completed += 1;
        self.total_completed += 1;
        self.latencies.push(latency);
        self.completions.push(now);
    }
}

#[derive(Debug, Clone, Default)]
pub struct Series {
    pub t_ns: Vec<Ns>,
    /// Cumulative hierarchical usage per cgroup, row per sample.
    pub usage_ns: Vec<u64>,
    /// Cumulative completions per service, row per sample (never reset).
    pub completed: Vec<u64>,
    /// Cumulative cpu.stat nr_throttled and throttled_time per cgroup, row per sample.
    pub nr_throttled: Vec<u64>,
    pub throttled_ns: Vec<u64>,
    /// memory.current per cgroup, row per sample (empty when memory is not modelled).
    pub memory_bytes: Vec<u64>,
    /// Bytes read + written on the disk, and sent on the link, per cgroup subtree since time
    /// 0, row per sample (empty without a disk / link).
    pub io_bytes: Vec<u64>,
    pub net_bytes: Vec<u64>,
}

/// Nearest-rank percentile (p in 0..=100) of an unsorted slice; None when empty.
pub fn percentile(values: &[Ns], p: f64) -> Option<Ns> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runqlat_buckets_are_the_bit_length_of_whole_microseconds() {
        let cases = [
            (0, 0),
            (999, 0),
            (1_000, 1),
            (1_999, 1),
            (2_000, 2),
            (3_999, 2),
            (4_000, 3),
        ];
        for (ns, k) in cases {
            assert_eq!(runqlat_bucket(ns), k, "{ns} ns");
        }
        assert_eq!(runqlat_bucket(1_024_000), 11);
        assert_eq!(runqlat_bucket(u64::MAX), RUNQLAT_BUCKETS - 1);
    }

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 99.9), Some(100));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
