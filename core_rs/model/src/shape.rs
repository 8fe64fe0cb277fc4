//! Workload shapes: a request's CPU on a thread as a sequence of bursts and waits.
//!
//! A real service thread rarely burns a request's CPU in one go: it blocks between bursts
//! (a read, a lock, a network round trip, a wakeup of a pooled thread). While it sleeps it is
//! off the run queue, and it comes back through the ordinary wakeup path — placement,
//! `place_entity` (EEVDF lag and eligibility, or CFS's sleeper credit), wakeup preemption —
//! which is what decides how a sleeper fares beside CPU hogs. A shape says how: the request's
//! CPU C (drawn from `service`, as without a shape) runs as `bursts` equal parts, and between
//! two consecutive parts the thread sleeps for a draw of `wait`.

use crate::dist::Dist;
use crate::error::{Result, SpecError};
use crate::rng::Rng;
use serde::Deserialize;

/// The most bursts a request may come in (a part is at least 1 ns; more parts than this are
/// no longer bursts but noise).
pub const MAX_BURSTS: u32 = 1_000_000;

/// `shape = { bursts, wait }` of a closed or open loop (spec.rs).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub bursts: u32,
    pub wait: Dist,
}

impl Shape {
    pub fn validate(&self, field: &str) -> Result<()> {
        if !(1..=MAX_BURSTS).contains(&self.bursts) {
            return Err(SpecError::new(
                format!("{field}.bursts"),
                format!("must be in 1..={MAX_BURSTS} (got {})", self.bursts),
            ));
        }
        self.wait.validate(&format!("{field}.wait"))
    }

    /// The run-time state for `threads` threads, or None when the shape is one burst (the
    /// unshaped model: no wait is ever drawn, so the random stream is the same as without a
    /// shape and results are bit-identical).
    pub fn build(shape: &Option<Shape>, threads: usize) -> Option<Shaped> {
        match shape {
            Some(s) if s.bursts > 1 => Some(Shaped {
                wait: s.wait.clone(),
                parts: Parts::new(s.bursts, threads),
            }),
            _ => None,
        }
    }
}

/// The next part of a request whose CPU left is `rest`, in `left` (>= 1) parts: the parts are
/// equal to the nanosecond, the last one taking the remainder, so they sum to the request's
/// CPU; a part is at least 1 ns (the core's smallest piece of work).
pub fn next_part(rest: u64, left: u32) -> u64 {
    (rest / left.max(1) as u64).max(1)
}

/// The parts of a request of `total` CPU and the wait drawn after each (none after the last),
/// in order: what a thread on the host runs (colosim-load), the same arithmetic and draws,
/// one part after another, as `Shaped` gives the simulated thread.
pub fn plan(total: u64, shape: &Option<Shape>, rng: &mut Rng) -> Vec<(u64, u64)> {
    let Some(s) = shape.as_ref().filter(|s| s.bursts > 1) else {
        return vec![(total, 0)];
    };
    let (mut rest, mut out) = (total, Vec::with_capacity(s.bursts as usize));
    for left in (1..=s.bursts).rev() {
        let part = next_part(rest, left);
        rest = rest.saturating_sub(part);
        let wait = if left > 1 { s.wait.sample(rng) } else { 0 };
        out.push((part, wait));
    }
    out
}

/// Timer slots of a closed or open loop at or above this (and below `workload::START`) are
/// thread `slot − WAIT_OVER`'s wait between two bursts ending.
pub const WAIT_OVER: u32 = 1 << 29;

/// Per thread (or client), a piece of CPU being run as `n` equal parts (`next_part`): what
/// is left of it and in how many parts. A shape's bursts and a closed loop's rounds
/// (`Rounds`) both split work this way.
#[derive(Debug)]
pub struct Parts {
    pub n: u32,
    pub rest: Vec<u64>,
    pub left: Vec<u32>,
}

impl Parts {
    pub fn new(n: u32, slots: usize) -> Parts {
        Parts {
            n,
            rest: vec![0; slots],
            left: vec![0; slots],
        }
    }

    /// Slot `k` takes `total` CPU: its first part.
    pub fn start(&mut self, k: usize, total: u64) -> u64 {
        self.rest[k] = total;
        self.left[k] = self.n;
        self.take(k)
    }

    /// Slot `k`'s next part (the last one takes the remainder).
    pub fn take(&mut self, k: usize) -> u64 {
        let part = next_part(self.rest[k], self.left[k]);
        self.rest[k] = self.rest[k].saturating_sub(part);
        self.left[k] -= 1;
        part
    }

    /// Parts slot `k` has still to run.
    pub fn left(&self, k: usize) -> u32 {
        self.left[k]
    }
}

/// A shape at run time: per thread, the CPU of its current request not yet run and how many
/// parts it still comes in.
#[derive(Debug)]
pub struct Shaped {
    pub wait: Dist,
    pub parts: Parts,
}

/// What a thread does after a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterBurst {
    /// The request's CPU on this thread is all run.
    Done,
    /// Sleep this long (> 0), then run the next part (`resume`).
    Wait(u64),
    /// The wait drawn was 0: run on with this next part.
    Continue(u64),
}

impl Shaped {
    /// Thread `k` takes a request of `total` CPU: its first part.
    pub fn start(&mut self, k: usize, total: u64) -> u64 {
        self.parts.start(k, total)
    }

    /// Thread `k` finished a burst.
    pub fn after_burst(&mut self, k: usize, rng: &mut Rng) -> AfterBurst {
        if self.parts.left(k) == 0 {
            return AfterBurst::Done;
        }
        match self.wait.sample(rng) {
            0 => AfterBurst::Continue(self.parts.take(k)),
            wait => AfterBurst::Wait(wait),
        }
    }

    /// Thread `k`'s wait is over: the part it wakes with.
    pub fn resume(&mut self, k: usize) -> u64 {
        self.parts.take(k)
    }
}

/// The most rounds a closed loop's exchange may come in (as `MAX_BURSTS`).
pub const MAX_ROUNDS: u32 = MAX_BURSTS;

/// A closed loop's request as `n` rounds between its client and its server (spec.rs
/// `rounds`): the client's CPU for the request and the server's on each of its threads are
/// each split into `n` equal parts, and they alternate — client part 1, then every server
/// thread's part 1 (the client waits for all of them, as it waits for the server's next
/// block), client part 2, … , the servers' part n, which ends the request. This is a load
/// generator that reads and parses result blocks while the server produces the next: each
/// round is two wakeups, server→client and client→server, on the ordinary wakeup path.
/// One round is the model without rounds (the client's CPU in one burst before the request).
///
/// Streamed (spec.rs `Exchange::Stream`), round 1 is the same (the request, then the server's
/// first block), and from round 2 on the client's part k and every server thread's part k run
/// at once — the client parses block k − 1 while the server produces block k — and round
/// k + 1 starts when all of them are done: the party that finishes last runs on into its
/// next part and wakes the others (one wakeup of each waiting party a round). The request
/// completes with the last round.
#[derive(Debug)]
pub struct Rounds {
    /// Per client: its generator's CPU for the current request.
    pub client: Parts,
    /// Per server thread: its CPU for the current request.
    pub server: Parts,
    /// The rounds are streamed (`Exchange::Stream`), not alternated.
    pub stream: bool,
}

impl Rounds {
    /// The run-time state, or None for one round (nothing is split, so results are
    /// bit-identical to a loop without `rounds`).
    pub fn build(rounds: u32, stream: bool, clients: usize, threads: usize) -> Option<Rounds> {
        (rounds > 1).then(|| Rounds {
            client: Parts::new(rounds, clients),
            server: Parts::new(rounds, threads),
            stream,
        })
    }

    /// Client `c` finished a part: true when it was its first one (the request then goes
    /// out, through any delay; later parts hand the next round straight to the server).
    pub fn first_round_done(&self, c: usize) -> bool {
        self.client.left(c) + 1 == self.client.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(bursts: u32, wait_ns: u64) -> Shaped {
        let s = Some(Shape {
            bursts,
            wait: Dist::Constant { value_ns: wait_ns },
        });
        Shape::build(&s, 1).unwrap()
    }

    #[test]
    fn parts_sum_to_the_request_and_differ_by_at_most_the_remainder() {
        for (total, bursts) in [(10, 3), (10_000_001, 7), (5, 5), (1_000, 1_000)] {
            let mut s = shaped(bursts, 3);
            let mut rng = Rng::new(1);
            let mut parts = vec![s.start(0, total)];
            while let AfterBurst::Wait(w) = s.after_burst(0, &mut rng) {
                assert_eq!(w, 3);
                parts.push(s.resume(0));
            }
            assert_eq!(parts.len(), bursts as usize);
            assert_eq!(parts.iter().sum::<u64>(), total);
            let (lo, hi) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
            assert!(hi - lo < bursts as u64, "{parts:?}");
        }
    }

    #[test]
    fn the_host_plan_is_the_simulated_sequence() {
        let shape = Some(Shape {
            bursts: 4,
            wait: Dist::Exponential { mean_ns: 1e6 },
        });
        let (mut a, mut b) = (Rng::new(9), Rng::new(9));
        let plan = plan(10_000_003, &shape, &mut a);
        let mut s = Shape::build(&shape, 1).unwrap();
        let mut seq = vec![];
        let mut part = s.start(0, 10_000_003);
        loop {
            match s.after_burst(0, &mut b) {
                AfterBurst::Done => {
                    seq.push((part, 0));
                    break;
                }
                AfterBurst::Wait(w) => {
                    seq.push((part, w));
                    part = s.resume(0);
                }
                AfterBurst::Continue(next) => {
                    seq.push((part, 0));
                    part = next;
                }
            }
        }
        assert_eq!(plan, seq);
    }

    #[test]
    fn one_burst_is_no_shape() {
        let one = Some(Shape {
            bursts: 1,
            wait: Dist::Constant { value_ns: 5 },
        });
        assert!(Shape::build(&one, 3).is_none());
        assert_eq!(plan(42, &one, &mut Rng::new(1)), vec![(42, 0)]);
    }

    #[test]
    fn zero_bursts_are_refused_by_name() {
        let s = Shape {
            bursts: 0,
            wait: Dist::Constant { value_ns: 5 },
        };
        assert_eq!(
            s.validate("workloads[0].shape").unwrap_err().field,
            "workloads[0].shape.bursts"
        );
    }
}
