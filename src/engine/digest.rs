//! Content digests: canonical JSON and SHA-256 hex.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A copy of `value` with every object's keys in byte order, so equal content serialises equally.
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                if let Some(v) = map.get(k) {
                    out.insert(k.clone(), canonical(v));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Digest of a JSON value's canonical form.
pub fn value_digest(value: &Value) -> String {
    // Serialising a `Value` cannot fail: its keys are strings.
    let bytes = serde_json::to_vec(&canonical(value)).unwrap_or_default();
    sha256_hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_digest() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[1,{"q":1,"p":2}]}}"#).unwrap();
        let b = json!({"a":{"x":[1,{"p":2,"q":1}],"y":2},"b":1});
        assert_eq!(value_digest(&a), value_digest(&b));
    }

    #[test]
    fn big_numbers_keep_every_digit() {
        let a: Value = serde_json::from_str(r#"{"n":123456789012345678901234567890.5}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"n":123456789012345678901234567890.6}"#).unwrap();
        assert_ne!(value_digest(&a), value_digest(&b));
        assert!(
            serde_json::to_string(&a)
                .unwrap()
                .contains("123456789012345678901234567890.5")
        );
    }
}
