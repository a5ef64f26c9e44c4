//! Address escaping: every string round-trips through one safe key segment.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(name) = std::str::from_utf8(data) {
        let seg = choudoufu_live::store::key::escape(name);
        assert!(!seg.contains('/') && !seg.starts_with('.'));
        assert_eq!(choudoufu_live::store::key::unescape(&seg).as_deref(), Some(name));
        let _ = choudoufu_live::store::key::segment(name);
        let _ = choudoufu_live::engine::address::quote_key(name);
    }
    if let Ok(seg) = std::str::from_utf8(data) {
        let _ = choudoufu_live::store::key::unescape(seg);
    }
});
