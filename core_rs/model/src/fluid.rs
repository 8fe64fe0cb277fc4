//! Weighted max-min sharing of a capacity among flows under linear limits (progressive
//! filling). The disk (device time shared by IO weight, under throttles and iocost's budget)
//! and the egress link (bytes shared per flow, under per-cgroup and bandwidth-manager caps)
//! are both this one problem: raise every unfrozen flow's rate in proportion to its weight
//! until some limit is full, freeze the flows in it, and go on with the rest.

/// Σ coef × rate over `members` must stay ≤ `capacity`.
#[derive(Debug, Clone, Default)]
pub struct Limit {
    pub capacity: f64,
    /// (flow index, coefficient > 0).
    pub members: Vec<(usize, f64)>,
}

/// Rates of `weights.len()` flows. A flow that is in no limit is unbounded: callers put every
/// flow in the resource's own capacity limit. Weights must be > 0.
pub fn fill(weights: &[f64], limits: &[Limit]) -> Vec<f64> {
    let mut scratch = Filling::default();
    scratch.fill(weights, limits);
    scratch.rate
}

/// `fill`'s working memory, kept by a caller that refills on every event (the disk does, twice
/// per IO) so that filling allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct Filling {
    /// The rates of the last `fill`.
    pub rate: Vec<f64>,
    frozen: Vec<bool>,
    used: Vec<f64>,
    open: Vec<bool>,
    slope: Vec<f64>,
}

impl Filling {
    /// Progressive filling: the rates land in `self.rate`.
    pub fn fill(&mut self, weights: &[f64], limits: &[Limit]) {
        let n = weights.len();
        let (rate, frozen, used, open, slope) = (
            &mut self.rate,
            &mut self.frozen,
            &mut self.used,
            &mut self.open,
            &mut self.slope,
        );
        reset(rate, n, 0.0);
        reset(frozen, n, false);
        reset(used, limits.len(), 0.0);
        reset(slope, limits.len(), 0.0);
        open.clear();
        open.extend(limits.iter().map(|l| !l.members.is_empty()));
        let mut level = 0.0f64;
        loop {
            // the level at which the next limit fills: capacity left over the unfrozen
            // demand. Each open limit's slope (Σ coef × weight of its unfrozen flows) is
            // summed once a round and used twice: for this level and for what the limit used
            // by then (nothing freezes in between: the same sum in the same order).
            let mut best: Option<(usize, f64)> = None;
            for (i, l) in limits.iter().enumerate() {
                if !open[i] {
                    continue;
                }
                slope[i] = l
                    .members
                    .iter()
                    .filter(|&&(f, _)| !frozen[f])
                    .map(|&(f, c)| c * weights[f])
                    .sum();
                if slope[i] <= 0.0 {
                    open[i] = false;
                    continue;
                }
                let at = level + ((l.capacity - used[i]).max(0.0)) / slope[i];
                if best.is_none_or(|(_, b)| at < b) {
                    best = Some((i, at));
                }
            }
            let Some((full, at)) = best else { break };
            let dl = at - level;
            level = at;
            for i in 0..limits.len() {
                if open[i] {
                    used[i] += dl * slope[i];
                }
            }
            for f in 0..n {
                if !frozen[f] {
                    rate[f] += dl * weights[f];
                }
            }
            for &(f, _) in &limits[full].members {
                frozen[f] = true;
            }
            open[full] = false;
        }
    }
}

fn reset<T: Copy>(v: &mut Vec<T>, n: usize, x: T) {
    v.clear();
    v.resize(n, x);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(n: usize, cap: f64) -> Limit {
        Limit {
            capacity: cap,
            members: (0..n).map(|f| (f, 1.0)).collect(),
        }
    }

    #[test]
    fn weights_split_the_capacity() {
        let r = fill(&[10.0, 1.0], &[all(2, 110.0)]);
        assert!((r[0] - 100.0).abs() < 1e-9 && (r[1] - 10.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn a_capped_flow_leaves_the_rest_to_the_others() {
        // flow 0 (weight 10) capped at 20: flow 1 takes the other 90 (work conserving)
        let cap = Limit {
            capacity: 20.0,
            members: vec![(0, 1.0)],
        };
        let r = fill(&[10.0, 1.0], &[all(2, 110.0), cap]);
        assert!((r[0] - 20.0).abs() < 1e-9 && (r[1] - 90.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn coefficients_convert_units() {
        // a byte cap of 50 on a flow moving 2 bytes per unit: 25 units
        let cap = Limit {
            capacity: 50.0,
            members: vec![(0, 2.0)],
        };
        let r = fill(&[1.0], &[all(1, 100.0), cap]);
        assert!((r[0] - 25.0).abs() < 1e-9, "{r:?}");
    }
}
