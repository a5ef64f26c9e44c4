//! The record decoders: any bytes under any key give a record or a named error, never a panic.
#![no_main]
use choudoufu_live::engine::layout::{EstateName, Layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(estate) = EstateName::parse("fuzz") else { return };
    let layout = Layout::new(estate);
    if let Ok(record) = choudoufu_live::engine::record::Record::decode("tofu-records/fuzz/r/x", data, &layout) {
        let _ = record.content_digest();
        let _ = record.encode();
    }
    let _ = choudoufu_live::engine::record::EstateMeta::decode("tofu-records/fuzz/_estate", data, &layout);
});
