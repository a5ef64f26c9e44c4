//! The live block parser: any text in live.hcl gives a config or a named error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    if std::fs::write(dir.path().join("live.hcl"), data).is_ok() {
        let _ = choudoufu_live::config::LiveConfig::load(dir.path());
    }
});
