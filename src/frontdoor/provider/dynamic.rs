//! A provider's DynamicValue (cty's MessagePack, or JSON) read as the JSON a state or plan document holds.
//!
//! No schema is needed for the values the door records: cty writes strings as msgpack
//! strings, so a two-element array whose first element is binary is a dynamically typed
//! value (its type's JSON, then the value), read as the value alone. An unknown value (the
//! extension cty writes for it) reads as null, or, through [`to_json_and_unknowns`], is left
//! out and named in a mask of the shape of a plan's `after_unknown`, so a null and an unknown
//! stay apart. A number too large for an `i64` or `f64` is written by cty as a string and stays
//! one here.

use thiserror::Error;

use super::proto::tfplugin5::DynamicValue;

/// Why a DynamicValue could not be read.
#[derive(Debug, Error)]
pub enum DynamicError {
    /// Not valid MessagePack.
    #[error("not valid msgpack: {0}")]
    Msgpack(#[from] rmpv::decode::Error),
    /// Not valid JSON.
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A map key that is not a string.
    #[error("a map key is not a string")]
    Key,
}

/// The value `dv` holds, as JSON (null when it holds none).
pub fn to_json(dv: Option<&DynamicValue>) -> Result<serde_json::Value, DynamicError> {
    let Some(dv) = dv else {
        return Ok(serde_json::Value::Null);
    };
    if !dv.msgpack.is_empty() {
        let mut rest = dv.msgpack.as_slice();
        let value = rmpv::decode::read_value(&mut rest)?;
        return convert(&value);
    }
    if !dv.json.is_empty() {
        return Ok(serde_json::from_slice(&dv.json)?);
    }
    Ok(serde_json::Value::Null)
}

/// The value `dv` holds as a plan's `after` writes it (unknown attributes left out, unknown elements null), and where it is unknown as `after_unknown` writes it (`true` at each unknown value).
pub fn to_json_and_unknowns(
    dv: Option<&DynamicValue>,
) -> Result<(serde_json::Value, serde_json::Value), DynamicError> {
    use serde_json::Value as J;
    let Some(dv) = dv else {
        return Ok((J::Null, J::Bool(false)));
    };
    if !dv.msgpack.is_empty() {
        let mut rest = dv.msgpack.as_slice();
        let value = rmpv::decode::read_value(&mut rest)?;
        return known_and_unknown(&value);
    }
    // JSON carries no unknowns.
    Ok((to_json(Some(dv))?, J::Bool(false)))
}

/// The known part of `v` and its unknown mask (`false` where nothing is unknown).
fn known_and_unknown(
    v: &rmpv::Value,
) -> Result<(serde_json::Value, serde_json::Value), DynamicError> {
    use serde_json::Value as J;
    Ok(match v {
        rmpv::Value::Ext(..) => (J::Null, J::Bool(true)),
        rmpv::Value::Array(items) => match items.as_slice() {
            [rmpv::Value::Binary(_), value] => known_and_unknown(value)?,
            _ => {
                let mut known = Vec::with_capacity(items.len());
                let mut mask = Vec::with_capacity(items.len());
                for item in items {
                    let (k, m) = known_and_unknown(item)?;
                    known.push(k);
                    mask.push(m);
                }
                (J::Array(known), J::Array(mask))
            }
        },
        rmpv::Value::Map(entries) => {
            let mut known = serde_json::Map::new();
            let mut mask = serde_json::Map::new();
            for (k, v) in entries {
                let k = k.as_str().ok_or(DynamicError::Key)?;
                let (value, unknown) = known_and_unknown(v)?;
                if unknown == J::Bool(true) {
                    mask.insert(k.to_string(), unknown);
                    continue;
                }
                if unknown != J::Bool(false) {
                    mask.insert(k.to_string(), unknown);
                }
                known.insert(k.to_string(), value);
            }
            (J::Object(known), J::Object(mask))
        }
        other => (convert(other)?, J::Bool(false)),
    })
}

fn convert(v: &rmpv::Value) -> Result<serde_json::Value, DynamicError> {
    use serde_json::Value as J;
    Ok(match v {
        rmpv::Value::Nil | rmpv::Value::Ext(..) => J::Null,
        rmpv::Value::Boolean(b) => J::Bool(*b),
        rmpv::Value::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(n), _) => J::from(n),
            (None, Some(n)) => J::from(n),
            _ => J::Null,
        },
        rmpv::Value::F32(f) => float(f64::from(*f)),
        rmpv::Value::F64(f) => float(*f),
        rmpv::Value::String(s) => J::String(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        rmpv::Value::Binary(b) => J::String(String::from_utf8_lossy(b).into_owned()),
        rmpv::Value::Array(items) => match items.as_slice() {
            [rmpv::Value::Binary(_), value] => convert(value)?,
            _ => J::Array(items.iter().map(convert).collect::<Result<_, _>>()?),
        },
        rmpv::Value::Map(entries) => {
            let mut out = serde_json::Map::new();
            for (k, v) in entries {
                let k = k.as_str().ok_or(DynamicError::Key)?;
                out.insert(k.to_string(), convert(v)?);
            }
            J::Object(out)
        }
    })
}

/// A float as terraform's JSON writes it: whole numbers without a fraction.
fn float(f: f64) -> serde_json::Value {
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        // Whole and within f64's exact integers: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        return serde_json::Value::from(f as i64);
    }
    serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encode(v: &rmpv::Value) -> DynamicValue {
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, v).unwrap();
        DynamicValue {
            msgpack: buf,
            json: Vec::new(),
        }
    }

    #[test]
    fn msgpack_reads_as_state_json() {
        use rmpv::Value as M;
        let v = M::Map(vec![
            (M::from("name"), M::from("a")),
            (M::from("n"), M::F64(3.0)),
            (M::from("f"), M::F64(1.5)),
            (M::from("unknown"), M::Ext(0, vec![])),
            (
                M::from("dyn"),
                M::Array(vec![M::Binary(b"\"string\"".to_vec()), M::from("x")]),
            ),
            (M::from("tags"), M::Array(vec![M::from("t"), M::Nil])),
        ]);
        assert_eq!(
            to_json(Some(&encode(&v))).unwrap(),
            json!({"name": "a", "n": 3, "f": 1.5, "unknown": null, "dyn": "x", "tags": ["t", null]})
        );
        assert_eq!(to_json(None).unwrap(), json!(null));
        // A null and an unknown stay apart: the unknown is left out and named in the mask.
        assert_eq!(
            to_json_and_unknowns(Some(&encode(&v))).unwrap(),
            (
                json!({"name": "a", "n": 3, "f": 1.5, "dyn": "x", "tags": ["t", null]}),
                json!({"unknown": true, "tags": [false, false]})
            )
        );
        let nested = M::Map(vec![
            (M::from("tags"), M::Nil),
            (
                M::from("list"),
                M::Array(vec![M::from("a"), M::Ext(12, vec![1])]),
            ),
        ]);
        assert_eq!(
            to_json_and_unknowns(Some(&encode(&nested))).unwrap(),
            (
                json!({"tags": null, "list": ["a", null]}),
                json!({"list": [false, true]})
            )
        );
        let legacy = DynamicValue {
            msgpack: Vec::new(),
            json: br#"{"a":1}"#.to_vec(),
        };
        assert_eq!(to_json(Some(&legacy)).unwrap(), json!({"a": 1}));
        let bad = DynamicValue {
            msgpack: vec![0x92, 0x01],
            json: Vec::new(),
        };
        assert!(to_json(Some(&bad)).is_err());
    }
}
