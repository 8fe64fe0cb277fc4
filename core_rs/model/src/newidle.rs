//! NI_RANDOM: a newly idle CPU balances a domain only as often as such balances succeed
//! (33cf66d88306 "sched/fair: Proportional newidle balance", 6.19; in 6.18.y from 6.18.5, and
//! on this host: /sys/kernel/debug/sched/features lists NI_RANDOM on 6.18.44).
//!
//! Each CPU's sched domain keeps `newidle_call`, `newidle_success` and `newidle_ratio`
//! (sd_init: 512, 256, 512 — "50% success rate"). `sched_balance_newidle` throws a 1024-sided
//! die per domain: with d1k = rand % 1024 and weight = 1 + ratio, d1k > weight skips the
//! domain (counted as a call without success); otherwise it balances and counts a success of
//! round(1024 / weight) when it pulled — importance weights, so that `newidle_success` per
//! call estimates the success rate of every newly idle moment, run or skipped, in 1024ths.
//! After 1024 calls the ratio becomes the success count and both counts halve
//! (`update_newidle_stats`). A CPU whose pulls mostly fail stops trying: it then stays idle
//! beside another CPU's waiting task until a wakeup, a NOHZ idle balance or its own periodic
//! balance — idle gaps the host shows (nginx alone: its queue empty 2.4% of a CPU's time on
//! this host, 0.02% in the model without the die).
//!
//! Not modelled: NI_RATE (9fe89f022c05, 7.0; not on this 6.18.44 host: its features bitmask
//! has no bit past NI_RANDOM), which raises the ratio when newidle balances are rare; the
//! `avg_idle < max_newidle_lb_cost` gate, whose cost is the host's measured time of a
//! balance.

use crate::rng::Rng;
use crate::topology::CpuId;

/// Stream id of the die (rng.rs `Rng::stream`), apart from every other stream (workloads
/// 1.., idle exits 1 << 40, pool owners 1 << 41 + index, stalls 1 << 42).
const STREAM: u64 = 1 << 43;
/// The die's sides, and the count of calls after which the ratio is renewed.
const SIDES: u32 = 1024;

/// One CPU's counts for one of its domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainStats {
    pub call: u32,
    pub success: u32,
    pub ratio: u32,
}

impl Default for DomainStats {
    /// sd_init: a 50% success rate to start from.
    fn default() -> DomainStats {
        DomainStats {
            call: 512,
            success: 256,
            ratio: 512,
        }
    }
}

impl DomainStats {
    /// `update_newidle_stats`.
    pub fn record(&mut self, success: u32) {
        self.call += 1;
        self.success += success;
        if self.call >= SIDES {
            self.ratio = self.success;
            self.call /= 2;
            self.success /= 2;
        }
    }
}

/// The die and every CPU's counts per domain level.
#[derive(Debug, Clone)]
pub struct Newidle {
    rng: Rng,
    pub stats: Vec<Vec<DomainStats>>,
}

impl Newidle {
    pub fn new(seed: u64, domains_per_cpu: impl Iterator<Item = usize>) -> Newidle {
        Newidle {
            rng: Rng::stream(seed, STREAM),
            stats: domains_per_cpu.map(|n| vec![DomainStats::default(); n]).collect(),
        }
    }

    /// The die for `cpu`'s domain `d`: Some(the success weight) when the domain is to be
    /// balanced, None (and a call without success counted) when it is skipped.
    pub fn throw(&mut self, cpu: CpuId, d: usize) -> Option<u32> {
        let d1k = (self.rng.next_u64() % SIDES as u64) as u32;
        let s = &mut self.stats[cpu][d];
        let weight = 1 + s.ratio;
        if d1k > weight {
            s.record(0);
            return None;
        }
        Some((SIDES + weight / 2) / weight)
    }

    /// A balance the die let run: its success counted at `weight` if it pulled.
    pub fn ran(&mut self, cpu: CpuId, d: usize, weight: u32, pulled: bool) {
        self.stats[cpu][d].record(if pulled { weight } else { 0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_renewed_every_1024_calls_from_the_success_count() {
        let mut s = DomainStats::default();
        // 511 calls more reach 1023; the 512th renews: ratio = 256 + 512 × 1, halves after
        for _ in 0..511 {
            s.record(1);
        }
        assert_eq!(
            s,
            DomainStats {
                call: 1023,
                success: 767,
                ratio: 512
            }
        );
        s.record(1);
        assert_eq!(
            s,
            DomainStats {
                call: 512,
                success: 384,
                ratio: 768
            }
        );
    }

    #[test]
    fn the_die_runs_a_balance_with_probability_ratio_plus_two_over_1024() {
        // d1k in 0..1024 runs when d1k <= 1 + ratio: (ratio + 2) / 1024 of the throws
        for ratio in [0u32, 14, 510, 1022] {
            let mut n = Newidle::new(7, std::iter::once(1));
            let (mut ran, throws) = (0u32, 200_000u32);
            for _ in 0..throws {
                n.stats[0][0] = DomainStats {
                    call: 0,
                    success: 0,
                    ratio,
                };
                if n.throw(0, 0).is_some() {
                    ran += 1;
                }
            }
            let p = (ratio + 2) as f64 / 1024.0;
            let sd = (p * (1.0 - p) / throws as f64).sqrt();
            let got = ran as f64 / throws as f64;
            assert!(
                (got - p).abs() < 5.0 * sd + 1e-9,
                "ratio {ratio}: ran {got:.5}, want {p:.5}"
            );
        }
    }

    #[test]
    fn importance_weights_make_the_ratio_the_success_rate_of_every_idle_moment() {
        // every balance that runs pulls with probability q; the ratio settles at 1024·q·P(run)
        // /P(run) = 1024·q whatever the die lets run (the weight is 1024 / (1 + ratio))
        for q in [0.05f64, 0.5, 0.9] {
            let mut n = Newidle::new(3, std::iter::once(1));
            let mut pulls = Rng::new(11);
            for _ in 0..400_000 {
                if let Some(w) = n.throw(0, 0) {
                    n.ran(0, 0, w, pulls.uniform() < q);
                }
            }
            let ratio = n.stats[0][0].ratio as f64 / 1024.0;
            assert!((ratio - q).abs() < 0.08 + 0.25 * q, "q {q}: ratio {ratio:.3}");
        }
    }

    #[test]
    fn the_weight_rounds_1024_over_one_plus_the_ratio() {
        let mut n = Newidle::new(1, std::iter::once(1));
        // the first throw the die lets run, with the counts held at `ratio`
        let mut weight_at = |ratio: u32| {
            (0..100_000).find_map(|_| {
                n.stats[0][0] = DomainStats {
                    call: 0,
                    success: 0,
                    ratio,
                };
                n.throw(0, 0)
            })
        };
        assert_eq!(weight_at(1023), Some(1)); // weight 1024: always runs, a success counts 1
        assert_eq!(weight_at(0), Some(1024)); // weight 1: a success counts 1024
        assert_eq!(weight_at(2), Some(341)); // weight 3: (1024 + 1) / 3
    }
}
