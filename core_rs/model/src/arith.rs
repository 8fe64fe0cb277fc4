//! Exact wide-integer division with a narrow fast path. The model keeps its fixed-point
//! products in u128 so they cannot overflow (Δexec × NICE_0_LOAD, remaining work << 20),
//! but they almost always fit in 64 bits, and a u128 division is a call into a slow
//! software routine (`__udivti3`: ~3% of the 96-CPU node's time, docs/benchmarks.md). These
//! return exactly what the u128 operators return.

/// `num / d` and `num % d`.
#[inline]
pub fn div_rem(num: u128, d: u64) -> (u128, u64) {
    if num >> 64 == 0 {
        let n = num as u64;
        ((n / d) as u128, n % d)
    } else {
        (num / d as u128, (num % d as u128) as u64)
    }
}

/// `num / d`.
#[inline]
pub fn div(num: u128, d: u64) -> u128 {
    if num >> 64 == 0 {
        ((num as u64) / d) as u128
    } else {
        num / d as u128
    }
}

/// `num.div_ceil(d)`.
#[inline]
pub fn div_ceil(num: u128, d: u64) -> u128 {
    if num >> 64 == 0 {
        (num as u64).div_ceil(d) as u128
    } else {
        num.div_ceil(d as u128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the u128 operators, on both sides of the 64-bit boundary and at the edges.
    #[test]
    fn same_as_u128_operators() {
        let nums = [
            0u128,
            1,
            1023,
            u64::MAX as u128 - 1,
            u64::MAX as u128,
            u64::MAX as u128 + 1,
            (u64::MAX as u128) << 20,
            u128::MAX,
            123_456_789_012_345_678_901,
        ];
        for &n in &nums {
            for d in [1u64, 2, 3, 1024, 1_048_576, 88_761, u64::MAX] {
                let w = d as u128;
                assert_eq!(div_rem(n, d), (n / w, (n % w) as u64), "{n} / {d}");
                assert_eq!(div(n, d), n / w);
                assert_eq!(div_ceil(n, d), n.div_ceil(w));
            }
        }
    }
}
