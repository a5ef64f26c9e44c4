//! A test-only switch that cuts one mechanism out, so `make prove-claims` can show each claim's test fail without it.
//!
//! Compiled in only with the `mechanism-cut` feature, which refuses to build in release
//! mode; the mechanism to cut is named in `CHOUDOUFU_CUT` (comma-separated). Without the
//! feature every call answers `false` and the optimiser removes it.

#[cfg(all(feature = "mechanism-cut", not(debug_assertions)))]
compile_error!(
    "the mechanism-cut feature is for proving claims in tests and cannot be built in release mode"
);

/// The variable naming the mechanisms to cut.
pub const CUT_ENV: &str = "CHOUDOUFU_CUT";

/// Whether `mechanism` is cut out in this (test) build.
#[inline]
pub fn cut(mechanism: &str) -> bool {
    #[cfg(feature = "mechanism-cut")]
    {
        std::env::var(CUT_ENV)
            .map(|v| v.split(',').any(|m| m.trim() == mechanism))
            .unwrap_or(false)
    }
    #[cfg(not(feature = "mechanism-cut"))]
    {
        let _ = mechanism;
        false
    }
}
