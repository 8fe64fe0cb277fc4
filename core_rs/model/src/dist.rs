//! Service-time and think-time distributions. Values are nanoseconds of CPU work at speed 1.0.

use crate::error::{Result, SpecError};
use crate::rng::Rng;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    Constant {
        value_ns: u64,
    },
    Exponential {
        mean_ns: f64,
    },
    /// Log-normal with the given mean; `sigma` is the standard deviation of the underlying
    /// normal, so mu = ln(mean) − sigma²/2.
    Lognormal {
        mean_ns: f64,
        sigma: f64,
    },
    /// A histogram: bin i spans [edges_ns[i], edges_ns[i+1]) and is chosen with probability
    /// weights[i] / Σ weights; the value is uniform inside the bin.
    Empirical {
        edges_ns: Vec<u64>,
        weights: Vec<f64>,
    },
}

impl Dist {
    pub fn validate(&self, field: &str) -> Result<()> {
        let err = |k: &str, why: String| Err(SpecError::new(format!("{field}.{k}"), why));
        match self {
            Dist::Constant { .. } => Ok(()),
            Dist::Exponential { mean_ns } => {
                if !(mean_ns.is_finite() && *mean_ns > 0.0) {
                    return err("mean_ns", format!("must be > 0 (got {mean_ns})"));
                }
                Ok(())
            }
            Dist::Lognormal { mean_ns, sigma } => {
                if !(mean_ns.is_finite() && *mean_ns > 0.0) {
                    return err("mean_ns", format!("must be > 0 (got {mean_ns})"));
                }
                if !(sigma.is_finite() && *sigma >= 0.0 && *sigma <= 5.0) {
                    return err("sigma", format!("must be in [0, 5] (got {sigma})"));
                }
                Ok(())
            }
            Dist::Empirical { edges_ns, weights } => {
                if weights.is_empty() || edges_ns.len() != weights.len() + 1 {
                    return err(
                        "edges_ns",
                        format!(
                            "need len(weights) + 1 edges (got {} edges, {} weights)",
                            edges_ns.len(),
                            weights.len()
                        ),
                    );
                }
                if edges_ns.windows(2).any(|w| w[1] <= w[0]) {
                    return err("edges_ns", "must be strictly increasing".into());
                }
                if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) || weights.iter().sum::<f64>() <= 0.0 {
                    return err("weights", "must be >= 0 with a positive sum".into());
                }
                Ok(())
            }
        }
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let v = match self {
            Dist::Constant { value_ns } => return *value_ns,
            Dist::Exponential { mean_ns } => rng.exponential(*mean_ns),
            Dist::Lognormal { mean_ns, sigma } => {
                let mu = libm::log(*mean_ns) - sigma * sigma / 2.0;
                libm::exp(mu + sigma * rng.normal())
            }
            Dist::Empirical { edges_ns, weights } => {
                let total: f64 = weights.iter().sum();
                let mut x = rng.uniform() * total;
                let mut bin = weights.len() - 1;
                for (i, w) in weights.iter().enumerate() {
                    if x < *w {
                        bin = i;
                        break;
                    }
                    x -= w;
                }
                let (lo, hi) = (edges_ns[bin] as f64, edges_ns[bin + 1] as f64);
                lo + rng.uniform() * (hi - lo)
            }
        };
        v.round().max(0.0) as u64
    }

    pub fn mean_ns(&self) -> f64 {
        match self {
            Dist::Constant { value_ns } => *value_ns as f64,
            Dist::Exponential { mean_ns } | Dist::Lognormal { mean_ns, .. } => *mean_ns,
            Dist::Empirical { edges_ns, weights } => {
                let total: f64 = weights.iter().sum();
                weights
                    .iter()
                    .enumerate()
                    .map(|(i, w)| w * (edges_ns[i] + edges_ns[i + 1]) as f64 / 2.0)
                    .sum::<f64>()
                    / total
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(d: &Dist) -> f64 {
        let mut r = Rng::new(3);
        let n = 200_000;
        (0..n).map(|_| d.sample(&mut r) as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn sample_means_match_declared_means() {
        for d in [
            Dist::Exponential { mean_ns: 1e6 },
            Dist::Lognormal {
                mean_ns: 48e6,
                sigma: 0.4,
            },
            Dist::Empirical {
                edges_ns: vec![0, 100, 1000],
                weights: vec![3.0, 1.0],
            },
        ] {
            let m = mean_of(&d);
            assert!((m / d.mean_ns() - 1.0).abs() < 0.01, "{d:?}: {m} vs {}", d.mean_ns());
        }
    }

    #[test]
    fn empirical_rejects_bad_edges() {
        let d = Dist::Empirical {
            edges_ns: vec![0, 10],
            weights: vec![1.0, 1.0],
        };
        assert!(d.validate("s").unwrap_err().field.starts_with("s.edges_ns"));
    }
}
