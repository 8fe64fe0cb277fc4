//! `[kernel] version` and `[kernel] sched_features`: which EEVDF the fair class models.
//!
//! The kernel's fair class changed under the same name between 6.6 and 6.18
//! (kernel/sched/features.h; /sys/kernel/debug/sched/features shows the switches):
//! - 6.6: EEVDF with PLACE_LAG, PLACE_DEADLINE_INITIAL, RUN_TO_PARITY (protect until the
//!   deadline moves), WAKEUP_PREEMPTION.
//! - 6.12: DELAY_DEQUEUE and DELAY_ZERO (a sleeper that is not eligible stays queued until it
//!   is picked or has caught up), PLACE_REL_DEADLINE (a migrating entity keeps its relative
//!   deadline), PREEMPT_SHORT (a waker with a shorter slice may preempt a protected slice),
//!   PICK_BUDDY (the next buddy a sleeping task's group dequeue sets is picked when eligible).
//! - 6.17: RUN_TO_PARITY protects only up to the shortest slice queued (`set_protect_slice`:
//!   vprot = min(deadline, v + min_slice in virtual time)).
//! - 6.14 – 6.18.44: `reweight_entity` re-places the entity with `place_entity` (commit
//!   6d71a9c61604). For the running entity that double-counts it (avg_vruntime already holds
//!   it), so each reweight of a running group entity scales its lag by (W + 2w)/(W + w).
//!   Upstream reverted this in 101f3498b4bd (7.1; stable 6.18.45): `reweight_eevdf` again
//!   keeps V invariant. It holds a group entity's lag only while the group's queue on that
//!   CPU never empties: on a 6.18.44 host 3 sleepers on one CPU took 0.99 of it from a hog,
//!   2 beside 2 hogs (whose 1 ms sleeps end ~75 µs late) split it evenly. Sleeps of exactly
//!   1 ms after exactly 1 ms of CPU never leave that queue empty in the model (0.976 of the
//!   node where the host gave 0.6); with the host's late ends (replay/timer_slack.py) 0.51,
//!   and with the balancer's CPU loads composed as the kernel's (lb_groups.rs `cpu_load`)
//!   0.61 against the host's 0.61 (`colosim calibrate`'s "sleepers beside hogs" row;
//!   docs/replay.md, "Calibration").
//!
//! - every release: a task's wakeup may be pulled to the waker's CPU (`wake_affine`: WA_IDLE,
//!   WA_WEIGHT, WA_BIAS), and `select_idle_cpu` scans only as many CPUs as the LLC's
//!   utilisation leaves (SIS_UTIL, 6.0+; sis_util.rs). The model places wakeups this way only
//!   when `version` is given, so every scenario without one keeps the placement it always had
//!   (balance.rs).
//! - 6.12: custom slices (`sched_attr.sched_runtime`, slice.rs).
//! - 6.18.5+ and 6.19: NI_RANDOM, a newly idle CPU balances each domain with probability about
//!   its recent success rate (33cf66d88306; newidle.rs).
//!
//! `version` picks the defaults; `sched_features` overrides single switches by the kernel's
//! names. Known names that the model does not act on are accepted (replay writes the host's
//! whole list) and listed in `IGNORED`.

use crate::error::{Result, SpecError};
use std::collections::BTreeMap;

/// How `reweight_entity` treats a queued entity whose weight changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reweight {
    /// `reweight_eevdf` (6.7 – 6.13, 6.18.45+, 7.1+): v' = V − (V − v)·w/w', V invariant.
    Invariant,
    /// 6d71a9c61604 (6.14 – 6.18.44): update_entity_lag, then `place_entity` with the lag
    /// scaled by (W + w')/W where W counts the running entity itself.
    Replace,
}

/// The fair-class switches the model acts on (features.h names in the field docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedFeatures {
    /// PLACE_LAG: a waking entity keeps the lag it had when it slept.
    pub place_lag: bool,
    /// PLACE_DEADLINE_INITIAL: a new entity starts with half a slice.
    pub place_deadline_initial: bool,
    /// PLACE_REL_DEADLINE: an entity moved (not sleeping) keeps deadline − vruntime.
    pub place_rel_deadline: bool,
    /// RUN_TO_PARITY: the running entity keeps the CPU until it reaches its protected vruntime.
    pub run_to_parity: bool,
    /// PREEMPT_SHORT: a waker with a shorter slice cancels that protection.
    pub preempt_short: bool,
    /// PICK_BUDDY: an eligible next buddy is picked before the EEVDF pick.
    pub pick_buddy: bool,
    /// DELAY_DEQUEUE: a sleeping entity that is not eligible stays queued (sched_delayed).
    pub delay_dequeue: bool,
    /// DELAY_ZERO: a delayed entity leaving the queue keeps at most zero lag.
    pub delay_zero: bool,
    /// WAKEUP_PREEMPTION: a waking task may preempt the running one.
    pub wakeup_preemption: bool,
    /// Protection up to the shortest queued slice (6.17+) rather than to the deadline.
    pub protect_min_slice: bool,
    /// WA_IDLE: `wake_affine_idle` — an idle waker CPU, a sync waker alone on its CPU, or an
    /// idle previous CPU decides where a wakee goes.
    pub wa_idle: bool,
    /// WA_WEIGHT: `wake_affine_weight` — else the less loaded of the two CPUs.
    pub wa_weight: bool,
    /// WA_BIAS: that comparison favours the previous CPU by half the domain's imbalance_pct.
    pub wa_bias: bool,
    /// SIS_UTIL: `select_idle_cpu` scans at most the LLC's `nr_idle_scan` CPUs (sis_util.rs).
    pub sis_util: bool,
    pub reweight: Reweight,
    /// The release has custom slices (6.12+: `sched_attr.sched_runtime` sets `se->slice`;
    /// slice.rs). Not a features.h switch.
    pub custom_slices: bool,
    /// `can_migrate_task`'s cache test as the kernel has it in every release: a newly-idle
    /// pull leaves a task that ran less than the migration cost ago (exec_start), and an idle
    /// CPU's next balance comes in to its last plus the idle interval. Not a features.h
    /// switch: the model gates it behind an explicit release with wake_affine (`with_placement`),
    /// since without that placement nothing but the pull spreads a waker's wakees.
    pub cache_hot_pull: bool,
    /// NI_RANDOM (6.18.5+, 6.19+): a newly idle CPU balances a domain with probability about
    /// that domain's recent success rate (newidle.rs).
    pub ni_random: bool,
}

/// The features.h names the model acts on, in the order of `SchedFeatures`.
pub const MODELLED: [&str; 14] = [
    "PLACE_LAG",
    "PLACE_DEADLINE_INITIAL",
    "PLACE_REL_DEADLINE",
    "RUN_TO_PARITY",
    "PREEMPT_SHORT",
    "PICK_BUDDY",
    "DELAY_DEQUEUE",
    "DELAY_ZERO",
    "WAKEUP_PREEMPTION",
    "WA_IDLE",
    "WA_WEIGHT",
    "WA_BIAS",
    "SIS_UTIL",
    "NI_RANDOM",
];

/// features.h names (6.6 – 6.18) that are accepted but change nothing in the model: buddies
/// it does not model (NEXT_BUDDY, CACHE_HOT_BUDDY), PELT/util/balancing switches, HRTICK.
pub const IGNORED: [&str; 17] = [
    "NEXT_BUDDY",
    "CACHE_HOT_BUDDY",
    "HRTICK",
    "HRTICK_DL",
    "NONTASK_CAPACITY",
    "TTWU_QUEUE",
    "WARN_DOUBLE_CLOCK",
    "RT_PUSH_IPI",
    "RT_RUNTIME_SHARE",
    "LB_MIN",
    "ATTACH_AGE_LOAD",
    "UTIL_EST",
    "LATENCY_WARN",
    "HZ_BW",
    "SIS_PROP",
    "UTIL_EST_FASTUP",
    "NI_TARGET",
];

/// (major, minor, patch) of a version string such as "6.18" or "6.18.44".
fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

impl SchedFeatures {
    /// The defaults of a kernel version (features.h of that release).
    pub fn of_version(v: (u32, u32, u32)) -> SchedFeatures {
        let at_least = |m: u32, n: u32| (v.0, v.1) >= (m, n);
        let v612 = at_least(6, 12);
        // 6d71a9c61604 landed in 6.14; its revert in 7.1 and in 6.18.45.
        let replace = at_least(6, 14) && !at_least(7, 1) && !(v.0 == 6 && v.1 == 18 && v.2 >= 45);
        SchedFeatures {
            place_lag: true,
            place_deadline_initial: true,
            place_rel_deadline: v612,
            run_to_parity: true,
            preempt_short: v612,
            pick_buddy: v612,
            delay_dequeue: v612,
            delay_zero: v612,
            wakeup_preemption: true,
            protect_min_slice: at_least(6, 17),
            // features.h has them on in every release; see `from_spec` for the model's gate
            wa_idle: true,
            wa_weight: true,
            wa_bias: true,
            sis_util: true,
            reweight: if replace {
                Reweight::Replace
            } else {
                Reweight::Invariant
            },
            custom_slices: v612,
            cache_hot_pull: true,
            // 33cf66d88306: 6.19, and the 6.18 stable series from 6.18.5
            ni_random: at_least(6, 19) || (v.0 == 6 && v.1 == 18 && v.2 >= 5),
        }
    }

    /// `[kernel] version` (None: "6.6", the EEVDF the model had first) with the
    /// `sched_features` overrides applied.
    pub fn from_spec(version: Option<&str>, overrides: &BTreeMap<String, bool>) -> Result<SchedFeatures> {
        let v = match version {
            None => (6, 6, 0),
            Some(text) => parse_version(text).ok_or_else(|| {
                SpecError::new(
                    "kernel.version",
                    format!("must be a kernel release such as \"6.6\", \"6.12\" or \"6.18.44\" (got {text:?})"),
                )
            })?,
        };
        let mut f = SchedFeatures::of_version(v).with_placement(version.is_some());
        for (name, &on) in overrides {
            match f.switch(name) {
                Some(slot) => *slot = on,
                None if IGNORED.contains(&name.as_str()) => {}
                None => {
                    return Err(SpecError::new(
                        format!("kernel.sched_features.{name}"),
                        format!(
                            "is not a scheduler feature the model knows; known: {}",
                            MODELLED.join(", ")
                        ),
                    ))
                }
            }
        }
        Ok(f)
    }

    /// wake_affine, SIS_UTIL and the cache test of newly-idle pulls only behind an explicit
    /// release (`on`): without one, the placement every earlier result had (an idle sibling
    /// of the previous CPU, the whole LLC scanned, any waiting task pulled at once).
    fn with_placement(mut self, on: bool) -> SchedFeatures {
        (self.wa_idle, self.wa_weight, self.wa_bias, self.sis_util) = (on, on, on, on);
        self.cache_hot_pull = on;
        self.ni_random &= on;
        self
    }

    fn switch(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "PLACE_LAG" => &mut self.place_lag,
            "PLACE_DEADLINE_INITIAL" => &mut self.place_deadline_initial,
            "PLACE_REL_DEADLINE" => &mut self.place_rel_deadline,
            "RUN_TO_PARITY" => &mut self.run_to_parity,
            "PREEMPT_SHORT" => &mut self.preempt_short,
            "PICK_BUDDY" => &mut self.pick_buddy,
            "DELAY_DEQUEUE" => &mut self.delay_dequeue,
            "DELAY_ZERO" => &mut self.delay_zero,
            "WAKEUP_PREEMPTION" => &mut self.wakeup_preemption,
            "WA_IDLE" => &mut self.wa_idle,
            "WA_WEIGHT" => &mut self.wa_weight,
            "WA_BIAS" => &mut self.wa_bias,
            "SIS_UTIL" => &mut self.sis_util,
            "NI_RANDOM" => &mut self.ni_random,
            _ => return None,
        })
    }
}

impl Default for SchedFeatures {
    fn default() -> SchedFeatures {
        SchedFeatures::of_version((6, 6, 0)).with_placement(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_pick_the_release_defaults() {
        let f66 = SchedFeatures::from_spec(Some("6.6"), &BTreeMap::new()).unwrap();
        assert!(!f66.delay_dequeue && !f66.pick_buddy && f66.reweight == Reweight::Invariant);
        let f = SchedFeatures::from_spec(Some("6.18.44"), &BTreeMap::new()).unwrap();
        assert!(f.delay_dequeue && f.delay_zero && f.pick_buddy && f.protect_min_slice);
        assert_eq!(f.reweight, Reweight::Replace);
        let f = SchedFeatures::from_spec(Some("6.18.45"), &BTreeMap::new()).unwrap();
        assert_eq!(f.reweight, Reweight::Invariant);
        let f = SchedFeatures::from_spec(Some("6.12"), &BTreeMap::new()).unwrap();
        assert!(f.delay_dequeue && !f.protect_min_slice && f.reweight == Reweight::Invariant);
        // without a release: 6.6, and the wakeup placement without wake_affine
        let none = SchedFeatures::from_spec(None, &BTreeMap::new()).unwrap();
        assert!(f66.wa_idle && f66.wa_weight && f66.wa_bias && !none.wa_idle && !none.wa_weight);
        assert!(f66.sis_util && !none.sis_util);
        assert!(!f66.custom_slices && f.custom_slices);
        // NI_RANDOM from 6.18.5 in the 6.18 series, and in 6.19
        let ni = |v: &str| SchedFeatures::from_spec(Some(v), &BTreeMap::new()).unwrap().ni_random;
        assert!(!ni("6.18") && !ni("6.18.4") && ni("6.18.5") && ni("6.18.44") && ni("6.19") && !ni("6.12"));
        assert_eq!(none, f66.with_placement(false));
        assert_eq!(none, SchedFeatures::default());
    }

    #[test]
    fn overrides_and_clear_errors() {
        let o: BTreeMap<String, bool> =
            [("DELAY_DEQUEUE".to_string(), false), ("NEXT_BUDDY".to_string(), false)].into();
        let f = SchedFeatures::from_spec(Some("6.18"), &o).unwrap();
        assert!(!f.delay_dequeue && f.delay_zero);
        let o: BTreeMap<String, bool> = [("DELAY_DEQUE".to_string(), false)].into();
        let e = SchedFeatures::from_spec(Some("6.18"), &o).unwrap_err();
        assert_eq!(e.field, "kernel.sched_features.DELAY_DEQUE");
        let e = SchedFeatures::from_spec(Some("six"), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.field, "kernel.version");
    }
}
