//! A `cdftest_thing` object as terraform sends it (msgpack or JSON) and as this provider answers (msgpack).

use rmpv::Value as Mp;
use serde_json::Value as Js;
use thiserror::Error;

use choudoufu_live::frontdoor::plugin::proto::tfplugin6::DynamicValue;

/// A value terraform sent that is not a `cdftest_thing` object.
#[derive(Debug, Error)]
pub enum ThingError {
    /// Not valid msgpack.
    #[error("not valid msgpack: {0}")]
    Msgpack(String),
    /// Not valid JSON.
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// An attribute of the wrong type.
    #[error("attribute {0:?} has the wrong type")]
    Type(&'static str),
    /// Not an object.
    #[error("not an object")]
    NotObject,
}

/// One attribute's value: null, not yet known, or known.
#[derive(Clone, Debug, PartialEq)]
pub enum Val<T> {
    /// Null (unset).
    Null,
    /// Not known until apply.
    Unknown,
    /// Known.
    Known(T),
}

impl<T> Val<T> {
    /// The known value, if any.
    pub fn known(&self) -> Option<&T> {
        match self {
            Val::Known(v) => Some(v),
            Val::Null | Val::Unknown => None,
        }
    }
}

/// A `cdftest_thing`'s attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Thing {
    /// `name`, required.
    pub name: Val<String>,
    /// `value`, optional.
    pub value: Val<String>,
    /// `sleep_ms`, optional: how long its apply sleeps.
    pub sleep_ms: Val<f64>,
    /// `fail`, optional: its create or update fails.
    pub fail: Val<bool>,
    /// `id`, computed.
    pub id: Val<String>,
}

/// How long an apply of `thing` sleeps (none when unset, unknown or not positive).
pub fn sleep_of(thing: &Thing) -> Option<std::time::Duration> {
    thing
        .sleep_ms
        .known()
        .filter(|ms| ms.is_finite() && **ms > 0.0)
        .map(|ms| std::time::Duration::from_secs_f64(ms / 1000.0))
}

fn from_mp_str(v: Option<&Mp>, what: &'static str) -> Result<Val<String>, ThingError> {
    match v {
        None | Some(Mp::Nil) => Ok(Val::Null),
        Some(Mp::Ext(..)) => Ok(Val::Unknown),
        Some(Mp::String(s)) => s
            .as_str()
            .map(|s| Val::Known(s.to_string()))
            .ok_or(ThingError::Type(what)),
        Some(_) => Err(ThingError::Type(what)),
    }
}

fn from_mp_num(v: Option<&Mp>, what: &'static str) -> Result<Val<f64>, ThingError> {
    match v {
        None | Some(Mp::Nil) => Ok(Val::Null),
        Some(Mp::Ext(..)) => Ok(Val::Unknown),
        Some(Mp::Integer(i)) => i.as_f64().map(Val::Known).ok_or(ThingError::Type(what)),
        Some(Mp::F32(f)) => Ok(Val::Known(f64::from(*f))),
        Some(Mp::F64(f)) => Ok(Val::Known(*f)),
        // cty sends numbers too large for 64 bits as their decimal text.
        Some(Mp::String(s)) => s
            .as_str()
            .and_then(|s| s.parse().ok())
            .map(Val::Known)
            .ok_or(ThingError::Type(what)),
        Some(_) => Err(ThingError::Type(what)),
    }
}

fn from_mp_bool(v: Option<&Mp>, what: &'static str) -> Result<Val<bool>, ThingError> {
    match v {
        None | Some(Mp::Nil) => Ok(Val::Null),
        Some(Mp::Ext(..)) => Ok(Val::Unknown),
        Some(Mp::Boolean(b)) => Ok(Val::Known(*b)),
        Some(_) => Err(ThingError::Type(what)),
    }
}

fn from_js_str(v: Option<&Js>, what: &'static str) -> Result<Val<String>, ThingError> {
    match v {
        None | Some(Js::Null) => Ok(Val::Null),
        Some(Js::String(s)) => Ok(Val::Known(s.clone())),
        Some(_) => Err(ThingError::Type(what)),
    }
}

/// The object in a DynamicValue: `None` for a null object (no prior state, or a destroy).
pub fn decode(dv: Option<&DynamicValue>) -> Result<Option<Thing>, ThingError> {
    let Some(dv) = dv else {
        return Ok(None);
    };
    if !dv.msgpack.is_empty() {
        let mut rest = dv.msgpack.as_slice();
        let value =
            rmpv::decode::read_value(&mut rest).map_err(|e| ThingError::Msgpack(e.to_string()))?;
        let entries = match value {
            Mp::Nil => return Ok(None),
            Mp::Map(entries) => entries,
            _ => return Err(ThingError::NotObject),
        };
        let get = |k: &str| {
            entries
                .iter()
                .find(|(key, _)| key.as_str() == Some(k))
                .map(|(_, v)| v)
        };
        return Ok(Some(Thing {
            name: from_mp_str(get("name"), "name")?,
            value: from_mp_str(get("value"), "value")?,
            sleep_ms: from_mp_num(get("sleep_ms"), "sleep_ms")?,
            fail: from_mp_bool(get("fail"), "fail")?,
            id: from_mp_str(get("id"), "id")?,
        }));
    }
    if dv.json.is_empty() {
        return Ok(None);
    }
    from_json(&serde_json::from_slice(&dv.json)?)
}

/// The object in a JSON value (a state's `attributes`, an object file): `None` for null.
pub fn from_json(v: &Js) -> Result<Option<Thing>, ThingError> {
    let o = match v {
        Js::Null => return Ok(None),
        Js::Object(o) => o,
        _ => return Err(ThingError::NotObject),
    };
    let sleep_ms = match o.get("sleep_ms") {
        None | Some(Js::Null) => Val::Null,
        Some(Js::Number(n)) => Val::Known(n.as_f64().ok_or(ThingError::Type("sleep_ms"))?),
        Some(_) => return Err(ThingError::Type("sleep_ms")),
    };
    let fail = match o.get("fail") {
        None | Some(Js::Null) => Val::Null,
        Some(Js::Bool(b)) => Val::Known(*b),
        Some(_) => return Err(ThingError::Type("fail")),
    };
    Ok(Some(Thing {
        name: from_js_str(o.get("name"), "name")?,
        value: from_js_str(o.get("value"), "value")?,
        sleep_ms,
        fail,
        id: from_js_str(o.get("id"), "id")?,
    }))
}

/// cty's unknown value: any msgpack extension (cty reads every extension as unknown).
fn unknown() -> Mp {
    Mp::Ext(0, vec![0])
}

fn mp_str(v: &Val<String>) -> Mp {
    match v {
        Val::Null => Mp::Nil,
        Val::Unknown => unknown(),
        Val::Known(s) => Mp::from(s.as_str()),
    }
}

fn mp_num(v: &Val<f64>) -> Mp {
    match v {
        Val::Null => Mp::Nil,
        Val::Unknown => unknown(),
        Val::Known(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Mp::from(*f as i64),
        Val::Known(f) => Mp::F64(*f),
    }
}

fn mp_bool(v: &Val<bool>) -> Mp {
    match v {
        Val::Null => Mp::Nil,
        Val::Unknown => unknown(),
        Val::Known(b) => Mp::Boolean(*b),
    }
}

/// The DynamicValue of an object (null: `None`), as msgpack.
pub fn encode(thing: Option<&Thing>) -> DynamicValue {
    let value = match thing {
        None => Mp::Nil,
        Some(t) => Mp::Map(vec![
            (Mp::from("fail"), mp_bool(&t.fail)),
            (Mp::from("id"), mp_str(&t.id)),
            (Mp::from("name"), mp_str(&t.name)),
            (Mp::from("sleep_ms"), mp_num(&t.sleep_ms)),
            (Mp::from("value"), mp_str(&t.value)),
        ]),
    };
    let mut msgpack = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut msgpack, &value);
    DynamicValue {
        msgpack,
        json: Vec::new(),
    }
}

/// A known object as JSON (an object file); unknown attributes are null.
pub fn to_json(t: &Thing) -> Js {
    let s = |v: &Val<String>| v.known().map_or(Js::Null, |s| Js::from(s.as_str()));
    serde_json::json!({
        "name": s(&t.name),
        "value": s(&t.value),
        "sleep_ms": t.sleep_ms.known().and_then(|f| serde_json::Number::from_f64(*f)).map_or(Js::Null, Js::Number),
        "fail": t.fail.known().map_or(Js::Null, |b| Js::Bool(*b)),
        "id": s(&t.id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgpack_round_trips_with_unknowns() {
        let t = Thing {
            name: Val::Known("a".into()),
            value: Val::Null,
            sleep_ms: Val::Known(250.0),
            fail: Val::Known(false),
            id: Val::Unknown,
        };
        let dv = encode(Some(&t));
        assert_eq!(decode(Some(&dv)).unwrap(), Some(t));
        assert_eq!(decode(Some(&encode(None))).unwrap(), None);
    }

    #[test]
    fn json_state_reads() {
        let v = serde_json::json!({"name": "a", "value": "v", "sleep_ms": 1.5, "fail": null, "id": "x"});
        let t = from_json(&v).unwrap().unwrap();
        assert_eq!(t.sleep_ms, Val::Known(1.5));
        assert_eq!(from_json(&to_json(&t)).unwrap(), Some(t));
        assert!(from_json(&serde_json::json!({"name": 3})).is_err());
    }
}
