//! The state document parser: any bytes give a value or a named error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(split) = choudoufu_live::engine::state::parse(data) {
        let header = choudoufu_live::engine::state::Header {
            lineage: split.lineage.clone(),
            serial: split.serial,
            terraform_version: split.terraform_version.clone(),
        };
        let again = choudoufu_live::engine::state::assemble_bytes(&header, &split.items);
        // What we assemble always parses back.
        assert!(choudoufu_live::engine::state::parse(&again).is_ok());
    }
});
