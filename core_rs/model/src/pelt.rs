//! PELT, per-entity load tracking (kernel/sched/pelt.c), as far as group shares need it: a
//! cfs_rq's `load_avg` (a geometric average of its queued weight over 1024 µs periods,
//! y^32 = 1/2), the task group's `load_avg` as the sum of each CPU's published contribution
//! (`update_tg_load_avg`: refreshed when it moved by more than 1/64, at most once per ms), and
//! `calc_group_shares` from these (fair.c). `[kernel] group_shares = "pelt"` switches the core
//! to them; "instant" (the default) keeps shares from instantaneous queue weights.
//!
//! The root cfs_rq's average is kept whatever `group_shares` says: it is the load balancer's
//! `cpu_load` (lb_groups.rs), and a task the balancer moves takes its load with it
//! (`Avg::detach` / `Avg::attach`).
//!
//! Each task entity keeps its own average too (`se->avg`, `__update_load_avg_se`: its weight
//! while queued, nothing while asleep), brought to date where its on_rq changes (enqueue,
//! dequeue) and read lazily (`load_avg_at`); it is the task's load for `task_h_load`
//! (balance.rs), and what a migrating task takes from its old CPU's root average and brings to
//! the new one (`remove_entity_load_avg` on a wakeup migration, `detach_entity_load_avg` when
//! the balancer moves it).
//!
//! Time is the kernel's: nanoseconds shifted right by 10 (≈ µs), periods of 1024 of those.
//! The cfs_rq's sum is accumulated from its own `load.weight` (`__update_load_avg_cfs_rq`).

use crate::tunables::MIN_SHARES;

/// Periods for the contribution to halve (`LOAD_AVG_PERIOD`).
pub const LOAD_AVG_PERIOD: u32 = 32;
/// The largest possible sum, 1024 × Σ y^n in the kernel's truncating arithmetic (sched-pelt.h).
pub const LOAD_AVG_MAX: u64 = 47742;
/// `PELT_MIN_DIVIDER`: the divider of a sum whose current period has just started.
pub const PELT_MIN_DIVIDER: u64 = LOAD_AVG_MAX - 1024;
/// tg->load_avg is written at most once per ms per cfs_rq (fair.c `update_tg_load_avg`, 6.7+).
pub const TG_LOAD_RATELIMIT_NS: u64 = 1_000_000;

/// y^n × 2^32 for n < 32, y^32 = 1/2 (`runnable_avg_yN_inv`, generated as
/// Documentation/scheduler/sched-pelt.c does: (2^32 − 1) × y^n, truncated).
const Y_N_INV: [u32; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796, 0xd744fcc9,
    0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46, 0xb504f333, 0xb123f581,
    0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9, 0x9837f050, 0x94f4efa8, 0x91c3d373,
    0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// `decay_load`: val × y^n, whole half-lives by shifting, the rest by the table.
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD as u64 * 63 {
        return 0;
    }
    let (mut val, mut n) = (val, n);
    if n >= LOAD_AVG_PERIOD as u64 {
        val >>= n / LOAD_AVG_PERIOD as u64;
        n %= LOAD_AVG_PERIOD as u64;
    }
    ((val as u128 * Y_N_INV[n as usize] as u128) >> 32) as u64
}

/// `__accumulate_pelt_segments`: d1 (the rest of the first period, decayed `periods` times),
/// the full periods between (1024 each, decayed: LOAD_AVG_MAX − y^p·LOAD_AVG_MAX − 1024), d3.
fn accumulate_segments(periods: u64, d1: u64, d3: u64) -> u64 {
    let c1 = decay_load(d1, periods);
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - 1024;
    c1 + c2 + d3
}

/// A group entity's average counts its runnable time unweighted, at this load (its
/// load_avg is then RUNNABLE_UNIT at most): `cpu_load` weighs it by the entity's current
/// weight, as the kernel's `reweight_entity` rescales a group entity's load_avg at once.
pub const RUNNABLE_UNIT: u64 = 1024;

/// A `sched_avg`'s sum and average of one signal: a cfs_rq's or entity's load, or an entity's
/// running time (`Se.util`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Avg {
    /// In ns, advanced by whole 1024 ns units (the remainder is carried to the next update).
    pub last_update_time: u64,
    /// Σ weight × contribution, weight unscaled.
    pub load_sum: u64,
    /// How much of the current period (of 1024 units) is already accumulated.
    pub period_contrib: u32,
    pub load_avg: u64,
}

impl Avg {
    /// `___update_load_sum` then `___update_load_avg`: bring the sums to `now` with `load`
    /// (the cfs_rq's unscaled weight since the last update). Returns whether a period
    /// boundary was crossed (the kernel's `decayed`: only then is load_avg recomputed).
    pub fn update(&mut self, now: u64, load: u64) -> bool {
        let Some(delta) = now.checked_sub(self.last_update_time) else {
            self.last_update_time = now; // the clock went back (cannot here; the kernel's rule)
            return false;
        };
        let delta = delta >> 10;
        if delta == 0 {
            return false;
        }
        self.last_update_time += delta << 10;
        // accumulate_sum
        let mut contrib = delta;
        let delta = delta + self.period_contrib as u64;
        let periods = delta / 1024;
        let rest = delta % 1024;
        if periods > 0 {
            self.load_sum = decay_load(self.load_sum, periods);
            if load > 0 {
                contrib = accumulate_segments(periods, 1024 - self.period_contrib as u64, rest);
            }
        }
        self.period_contrib = rest as u32;
        self.load_sum += load * contrib;
        if periods == 0 {
            return false;
        }
        // ___update_load_avg(sa, 1): the divider counts the part of the current period.
        self.load_avg = self.load_sum / (PELT_MIN_DIVIDER + self.period_contrib as u64);
        true
    }

    /// `get_pelt_divider`: LOAD_AVG_MAX less the part of the current period still to come.
    fn divider(&self) -> u64 {
        PELT_MIN_DIVIDER + self.period_contrib as u64
    }

    /// `detach_entity_load_avg` (6.1+), as `update_tg_cfs_load` propagates it to the root: an
    /// entity of average `load_avg` leaves (`sub_positive` on the average, its sum
    /// `load_avg × divider` off the sum, the sum kept ≥ load_avg × PELT_MIN_DIVIDER so the two
    /// stay in sync). Returns what was taken (at most what there was), for `attach`.
    pub fn detach(&mut self, load_avg: u64) -> u64 {
        let taken = load_avg.min(self.load_avg);
        self.load_avg -= taken;
        self.load_sum = self
            .load_sum
            .saturating_sub(taken * self.divider())
            .max(self.load_avg * PELT_MIN_DIVIDER);
        taken
    }

    /// `attach_entity_load_avg`: an entity of average `load_avg` joins with its sum
    /// `load_avg × divider` (the entity is aligned to this queue's period first).
    pub fn attach(&mut self, load_avg: u64) {
        self.load_avg += load_avg;
        self.load_sum += load_avg * self.divider();
    }

    /// `attach`, the average raised by `load_avg` but to `most` at the highest (a group
    /// entity's runnable or running time: `min(runnable_sum + se->avg.load_sum, divider)`).
    pub fn attach_at_most(&mut self, load_avg: u64, most: u64) {
        self.attach(load_avg.min(most.saturating_sub(self.load_avg)));
    }

    /// `update_tg_cfs_load` when runnable time leaves a group entity's queue: the entity's sum
    /// becomes `sum` (at most what it had, at least its running time: the caller clips), and
    /// its average that sum over the divider.
    pub fn set_sum(&mut self, sum: u64) {
        self.load_sum = sum;
        self.load_avg = sum / self.divider();
    }

    /// `init_entity_runnable_average` + the first `attach_entity_load_avg`: a new task starts
    /// as if it had always been runnable at `weight` (load_avg = weight, its sum
    /// load_avg × the divider of a period just begun), so it is not taken for a sleeper.
    pub fn runnable_from(now: u64, weight: u64) -> Avg {
        Avg {
            last_update_time: now,
            load_sum: weight * PELT_MIN_DIVIDER,
            period_contrib: 0,
            load_avg: weight,
        }
    }

    /// The entity's weight changes from `old` to `new` (`reweight_entity`): its history is
    /// the same runnable time, now counted at the new weight.
    pub fn reweight(&mut self, old: u64, new: u64) {
        if old == 0 || old == new {
            return;
        }
        self.load_sum = (self.load_sum as u128 * new as u128 / old as u128) as u64;
        self.load_avg = (self.load_avg as u128 * new as u128 / old as u128) as u64;
    }

    /// The average as `update` would leave it at `now` with `load` since the last update
    /// (`update_blocked_averages` before the balancer reads `cpu_load`), without changing it.
    pub fn load_avg_at(&self, now: u64, load: u64) -> u64 {
        // no period boundary before `now`: `update` would leave load_avg as it is
        if (now.saturating_sub(self.last_update_time) >> 10) + (self.period_contrib as u64) < 1024 {
            return self.load_avg;
        }
        let mut a = self.clone();
        a.update(now, load);
        a.load_avg
    }
}

/// `update_tg_load_avg`: publish this cfs_rq's load_avg into the group's sum when it moved by
/// more than 1/64 of what was published, at most once per ms. `contrib` is the cfs_rq's
/// `tg_load_avg_contrib`, `tg_load` the group's `load_avg`, `last` when this cfs_rq last wrote
/// (never: the first write is not limited, as the kernel's sched_clock is far past 1 ms).
pub fn update_tg_load(now: u64, load_avg: u64, contrib: &mut u64, tg_load: &mut u64, last: &mut Option<u64>) {
    if last.is_some_and(|l| now.saturating_sub(l) < TG_LOAD_RATELIMIT_NS) {
        return;
    }
    if load_avg.abs_diff(*contrib) > *contrib / 64 {
        *tg_load = *tg_load - *contrib + load_avg;
        *contrib = load_avg;
        *last = Some(now);
    }
}

/// `calc_group_shares` (fair.c): load = max(load.weight, load_avg) of this CPU's cfs_rq (both
/// unscaled), tg_weight = tg->load_avg − this cfs_rq's contribution + load, shares =
/// tg_shares × load / tg_weight clamped to [MIN_SHARES, tg_shares] (tg_shares scaled).
pub fn group_shares(tg_shares: u64, load_weight: u64, load_avg: u64, tg_load: u64, contrib: u64) -> u64 {
    let load = load_weight.max(load_avg);
    let tg_weight = tg_load - contrib + load;
    let shares = if tg_weight > 0 {
        // u64 division when the product fits (arith.rs): the same quotient, no __udivti3
        crate::arith::div(tg_shares as u128 * load as u128, tg_weight) as u64
    } else {
        tg_shares
    };
    shares.clamp(MIN_SHARES, tg_shares)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One PELT period in ns (1024 units of 1024 ns).
    const PERIOD_NS: u64 = 1024 * 1024;

    #[test]
    fn the_table_is_y_to_the_n_with_y32_one_half() {
        // sched-pelt.c: y = 0.5^(1/32), entry n = (2^32 − 1) × y^n truncated.
        for (n, &v) in Y_N_INV.iter().enumerate() {
            let want = (((1u64 << 32) - 1) as f64 * libm::pow(0.5, n as f64 / 32.0)) as u64;
            assert_eq!(v as u64, want, "y^{n}");
        }
        // LOAD_AVG_MAX: the kernel's fixed point of sum = sum·y + 1024 (truncating), reached
        // after LOAD_AVG_MAX_N = 345 periods.
        let mut sum = 0u64;
        for _ in 0..400 {
            sum = decay_load(sum, 1) + 1024;
        }
        assert!(sum.abs_diff(LOAD_AVG_MAX) <= 32, "Σ 1024 y^n = {sum}");
        assert_eq!(decay_load(1000, 32), 499); // half a value (the table's 0xffffffff truncates)
        assert_eq!(decay_load(1 << 20, 64), (1 << 18) - 1);
        assert_eq!(decay_load(u64::MAX, 32 * 64), 0);
    }

    /// load_avg of a weight-`w` queue that was empty and is runnable for `periods` periods.
    fn runnable_for(w: u64, periods: u64) -> Avg {
        let mut a = Avg::default();
        a.update(periods * PERIOD_NS, w);
        a
    }

    #[test]
    fn a_runnable_queue_approaches_its_weight_as_one_minus_y_to_the_n() {
        // From 0, after n periods of weight w: load_avg = w (1 − y^n) (the divider counts
        // LOAD_AVG_MAX − 1024 at a period boundary: 32 periods give exactly w/2).
        for w in [1024u64, 3072, 15] {
            for n in [1u64, 8, 32, 64, 100, 200, 345] {
                let a = runnable_for(w, n);
                let want = w as f64 * (1.0 - libm::pow(0.5, n as f64 / 32.0));
                assert!(
                    (a.load_avg as f64 - want).abs() <= 1.0 + w as f64 / 512.0,
                    "w {w} after {n} periods: {} want {want:.1}",
                    a.load_avg
                );
                assert!(a.load_sum <= w * LOAD_AVG_MAX);
            }
        }
        assert_eq!(runnable_for(1024, 32).load_avg, 512);
        // Updating every 4 ms tick instead of once gives the same average (within rounding).
        let mut a = Avg::default();
        let mut t = 0;
        while t < 100 * PERIOD_NS {
            t += 4_000_000;
            a.update(t.min(100 * PERIOD_NS), 1024);
        }
        assert!(a.load_avg.abs_diff(runnable_for(1024, 100).load_avg) <= 2);
    }

    #[test]
    fn a_sleeping_queue_halves_every_32_periods() {
        let mut a = runnable_for(1024, 400);
        assert!(a.load_avg >= 1022, "saturated: {}", a.load_avg);
        let full = a.load_avg;
        let mut t = 400 * PERIOD_NS;
        for k in 1..=4 {
            t += 32 * PERIOD_NS;
            assert!(a.update(t, 0));
            let want = full >> k;
            assert!(
                a.load_avg.abs_diff(want) <= 2,
                "after {k} half-lives: {} want {want}",
                a.load_avg
            );
        }
        // Less than a unit of 1024 ns later nothing moves (the remainder waits).
        assert!(!a.update(t + 1000, 1024));
        assert_eq!(a.last_update_time, t);
    }

    #[test]
    fn a_reweighted_entity_keeps_its_runnable_time_at_the_new_weight() {
        // Runnable 32 periods from 0 at weight 1024: load_avg 512 (half of 1 − y^32). Set to
        // SCHED_IDLE's 3 it is 3/2 (1.5, truncated 1); back to 1024 from 3 the sum (not the
        // truncated average) carries it: 512.
        let mut a = runnable_for(1024, 32);
        assert_eq!(a.load_avg, 512);
        let sum = a.load_sum;
        a.reweight(1024, 3);
        assert_eq!((a.load_avg, a.load_sum), (1, sum * 3 / 1024));
        a.reweight(3, 1024);
        a.update(32 * PERIOD_NS + PERIOD_NS, 0);
        assert!(a.load_avg.abs_diff(512 * 1000 / 1022) <= 6, "{}", a.load_avg);
    }

    #[test]
    fn tg_load_is_refreshed_past_one_64th_at_most_once_per_ms() {
        let (mut contrib, mut tg, mut last) = (640u64, 1000u64, Some(5_000_000u64));
        // 650 − 640 = 10 = 640/64: not more than 1/64, nothing published.
        update_tg_load(7_000_000, 650, &mut contrib, &mut tg, &mut last);
        assert_eq!((contrib, tg, last), (640, 1000, Some(5_000_000)));
        // 651: past 1/64, but within a ms of the last write.
        update_tg_load(5_900_000, 651, &mut contrib, &mut tg, &mut last);
        assert_eq!((contrib, tg), (640, 1000));
        update_tg_load(6_000_000, 651, &mut contrib, &mut tg, &mut last);
        assert_eq!((contrib, tg, last), (651, 1011, Some(6_000_000)));
        // Down: 651 − 641 = 10 ≤ 651/64 = 10 stays; 640 goes.
        update_tg_load(8_000_000, 641, &mut contrib, &mut tg, &mut last);
        assert_eq!(contrib, 651);
        update_tg_load(8_000_000, 640, &mut contrib, &mut tg, &mut last);
        assert_eq!((contrib, tg), (640, 1000));
    }

    #[test]
    fn group_shares_on_two_cpus_by_hand() {
        let tg_shares = 1024 << 10;
        // CPU 0: one nice-0 task queued (weight 1024), load_avg 300 published as 300; CPU 1
        // published 700: tg load_avg 1000. load = max(1024, 300) = 1024, tg_weight = 1000 −
        // 300 + 1024 = 1724, shares = 1048576 × 1024 / 1724 = 622820 (0.594 of the group).
        assert_eq!(group_shares(tg_shares, 1024, 300, 1000, 300), 622_820);
        // CPU 1 with its task asleep (weight 0) but load_avg 700: load = 700, tg_weight = 1000,
        // shares = 1048576 × 700 / 1000 = 734003 — a blocked queue keeps most of the group.
        assert_eq!(group_shares(tg_shares, 0, 700, 1000, 700), 734_003);
        // Instantaneous weights alone (the "instant" model) would give CPU 0 all of it.
        assert_eq!(group_shares(tg_shares, 1024, 0, 0, 0), tg_shares);
        // Nothing anywhere: MIN_SHARES floor.
        assert_eq!(group_shares(tg_shares, 0, 0, 5000, 0), MIN_SHARES);
    }

    #[test]
    fn a_migrating_entity_takes_its_average_and_sum_along() {
        // A queue saturated at weight 3072 (three nice-0 tasks), at a period boundary: the
        // divider is PELT_MIN_DIVIDER = 46718. One task (load_avg 1024) leaves:
        // load_avg 3072 − 1024, load_sum − 1024 × 46718.
        let mut src = runnable_for(3072, 400);
        let (avg0, sum0) = (src.load_avg, src.load_sum);
        assert_eq!(src.period_contrib, 0);
        assert!(avg0.abs_diff(3072) <= 6, "{avg0}");
        assert_eq!(src.detach(1024), 1024);
        assert_eq!(src.load_avg, avg0 - 1024);
        assert_eq!(src.load_sum, sum0 - 1024 * 46718);
        // The empty destination, half-way through a period (period_contrib 512): divider
        // 46718 + 512 = 47230, so the sum is 1024 × 47230 and the next update keeps ~1024.
        let mut dst = Avg::default();
        dst.update(PERIOD_NS / 2, 0);
        assert_eq!(dst.period_contrib, 512);
        dst.attach(1024);
        assert_eq!((dst.load_avg, dst.load_sum), (1024, 1024 * 47230));
        dst.update(PERIOD_NS, 1024);
        assert!(dst.load_avg.abs_diff(1024) <= 2, "{}", dst.load_avg);
        // sub_positive: detaching more than there is leaves 0 (and takes only what there was),
        // and the sum never falls below load_avg × PELT_MIN_DIVIDER.
        let mut small = runnable_for(100, 400);
        let had = small.load_avg;
        assert_eq!(small.detach(5000), had);
        // (the sum keeps what truncation left over, less than one unit of average)
        assert_eq!(small.load_avg, 0);
        assert!(small.load_sum < PELT_MIN_DIVIDER, "{}", small.load_sum);
        let mut odd = Avg {
            load_sum: 10,
            load_avg: 50,
            ..Default::default()
        };
        odd.detach(20);
        assert_eq!((odd.load_avg, odd.load_sum), (30, 30 * PELT_MIN_DIVIDER));
        // load_avg_at reads the average a later update would give, leaving it unchanged —
        // within the current period too (no boundary crossed: the average stays).
        for dt in [0, 1000, 300_000, PERIOD_NS - 1, PERIOD_NS, 3 * PERIOD_NS + 5] {
            let mut b = dst.clone();
            b.update(PERIOD_NS + dt, 1024);
            assert_eq!(dst.load_avg_at(PERIOD_NS + dt, 1024), b.load_avg, "dt {dt}");
        }
        let before = src.clone();
        let later = src.load_avg_at(400 * PERIOD_NS + 32 * PERIOD_NS, 0);
        assert_eq!(src, before);
        assert!(later.abs_diff(before.load_avg / 2) <= 2, "{later}");
    }
}
