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
//!   keeps V invariant.
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
    pub reweight: Reweight,
}

/// The features.h names the model acts on, in the order of `SchedFeatures`.
pub const MODELLED: [&str; 9] = [
    "PLACE_LAG",
    "PLACE_DEADLINE_INITIAL",
    "PLACE_REL_DEADLINE",
    "RUN_TO_PARITY",
    "PREEMPT_SHORT",
    "PICK_BUDDY",
    "DELAY_DEQUEUE",
    "DELAY_ZERO",
    "WAKEUP_PREEMPTION",
];

/// features.h names (6.6 – 6.18) that are accepted but change nothing in the model: buddies
/// it does not model (NEXT_BUDDY, CACHE_HOT_BUDDY), PELT/util/balancing switches, HRTICK.
pub const IGNORED: [&str; 22] = [
    "NEXT_BUDDY",
    "CACHE_HOT_BUDDY",
    "HRTICK",
    "HRTICK_DL",
    "NONTASK_CAPACITY",
    "TTWU_QUEUE",
    "SIS_UTIL",
    "WARN_DOUBLE_CLOCK",
    "RT_PUSH_IPI",
    "RT_RUNTIME_SHARE",
    "LB_MIN",
    "ATTACH_AGE_LOAD",
    "WA_IDLE",
    "WA_WEIGHT",
    "WA_BIAS",
    "UTIL_EST",
    "LATENCY_WARN",
    "HZ_BW",
    "SIS_PROP",
    "UTIL_EST_FASTUP",
    "NI_RANDOM",
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
            reweight: if replace {
                Reweight::Replace
            } else {
                Reweight::Invariant
            },
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
        let mut f = SchedFeatures::of_version(v);
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
            _ => return None,
        })
    }
}

impl Default for SchedFeatures {
    fn default() -> SchedFeatures {
        SchedFeatures::of_version((6, 6, 0))
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
        assert_eq!(SchedFeatures::from_spec(None, &BTreeMap::new()).unwrap(), f66);
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
