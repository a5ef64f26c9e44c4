//! The live protocol's request validation: any request bytes give checked values or a refusal naming a field, never a panic.
#![no_main]
use choudoufu_live::frontdoor::plugin::live::validate::{self, FieldError, MAX_ADDRESS};
use choudoufu_live::frontdoor::plugin::proto::live as pb;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn named(r: Result<(), FieldError>) {
    if let Err(e) = r {
        assert!(!e.field.is_empty(), "a refusal names its field");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else { return };
    match pick % 8 {
        0 => {
            if let Ok(req) = pb::ConfigureRequest::decode(bytes) {
                named(validate::configure(&req).map(|_| ()));
            }
        }
        1 => {
            if let Ok(req) = pb::WriteRecordsRequest::decode(bytes) {
                let n = req.writes.len();
                match validate::write_records(req) {
                    Ok(writes) => assert_eq!(writes.len(), n),
                    Err(e) => assert!(e.field.starts_with("writes[")),
                }
            }
        }
        2 => {
            if let Ok(req) = pb::BeginChangeRequest::decode(bytes) {
                named(validate::begin_change(&req));
            }
        }
        3 => {
            if let Ok(req) = pb::CheckPlanRequest::decode(bytes) {
                named(validate::check_plan(&req));
            }
        }
        4 => {
            if let Ok(req) = pb::InjectMarkersRequest::decode(bytes) {
                named(validate::inject_markers(&req));
            }
        }
        5 => {
            if let Ok(req) = pb::FindByMarkersRequest::decode(bytes) {
                named(validate::find_by_markers(&req));
            }
        }
        6 => {
            if let Ok(req) = pb::ListUnrecordedRequest::decode(bytes) {
                named(validate::list_unrecorded(&req));
            }
        }
        _ => {
            // An address alone: accepted ones are short and hold no control character.
            let s = String::from_utf8_lossy(bytes);
            for check in [
                validate::resource_address,
                validate::output_name,
                validate::provider_address,
            ] {
                if check("address", &s).is_ok() {
                    assert!(s.len() <= MAX_ADDRESS);
                    assert!(!s.chars().any(char::is_control), "{s:?}");
                }
            }
        }
    }
});
