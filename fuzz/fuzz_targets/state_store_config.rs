//! The tfplugin6 state store's configuration: any msgpack or JSON bytes give settings or a named error, never a panic.
#![no_main]
use choudoufu_live::frontdoor::plugin::proto::tfplugin6::DynamicValue;
use choudoufu_live::frontdoor::plugin::state_store::config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the encoding terraform would have used.
    let Some((&pick, bytes)) = data.split_first() else { return };
    let dv = if pick % 2 == 0 {
        DynamicValue { msgpack: bytes.to_vec(), json: vec![] }
    } else {
        DynamicValue { msgpack: vec![], json: bytes.to_vec() }
    };
    if let Ok(attrs) = config::decode(&dv) {
        for allow_unknown in [false, true] {
            if let Err(e) = config::interpret(&attrs, allow_unknown) {
                // A named setting is one the configuration has, or one it lacks and needs.
                assert!(!e.message.is_empty());
            }
        }
    }
});
