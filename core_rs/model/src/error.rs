//! One error type for everything a user can get wrong. Each message names the field
//! (by its path in the core spec) and says why, so the Python side can show it as is.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Dotted path of the offending field, e.g. `workloads[2].rate_per_s`.
    pub field: String,
    pub reason: String,
}

impl SpecError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        SpecError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for SpecError {}

pub type Result<T> = std::result::Result<T, SpecError>;
