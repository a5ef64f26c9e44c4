//! The object `records import` leaves at an adopted workspace's key in place of the stock
//! state: a state document whose `terraform_version` stock terraform cannot parse, so that
//! terraform without `run` refuses to plan, naming choudoufu-live, and changes nothing.

/// The `terraform_version` of the marker: terraform prints it in its refusal.
pub const ADOPTED_VERSION: &str =
    "choudoufu-live: this state lives in records, run terraform through choudoufu-live run";

/// The marker object's bytes.
pub fn marker() -> Vec<u8> {
    serde_json::json!({
        "version": 4,
        "terraform_version": ADOPTED_VERSION,
        "serial": 1,
        "lineage": "choudoufu-live",
        "outputs": {},
        "resources": [],
        "check_results": null,
    })
    .to_string()
    .into_bytes()
}

/// Whether `bytes` are the marker (an object at the key that `run` may leave there).
pub fn is_marker(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        terraform_version: Option<String>,
    }
    serde_json::from_slice::<Head>(bytes)
        .ok()
        .and_then(|h| h.terraform_version)
        .is_some_and(|v| v == ADOPTED_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_known_and_a_state_is_not() {
        assert!(is_marker(&marker()));
        assert!(!is_marker(br#"{"version":4,"terraform_version":"1.11.4"}"#));
        assert!(!is_marker(b"not json"));
    }
}
