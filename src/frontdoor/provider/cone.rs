//! A cone plan's resource reads (`run --refresh=cone`): those outside the cone answered from their records, the rest sent to the provider.
//!
//! Terraform's `ReadResource` carries the object's current state (its record's, upgraded) and
//! private data. For an object outside the cone ([`ReadAnswers`]) the door answers with exactly
//! those, and its identity when the call carries one, as a read that found no drift answers;
//! no provider call is made. Every other read, and every data source read, goes on unchanged.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};

use super::dynamic;
use super::proto::tfplugin5::DynamicValue;
use super::wire::rewrite_field;
use crate::engine::cone::{Read, ReadAnswers};

/// The gRPC paths of the resource read, in protocols 5 and 6.
const READ_PATHS: &[&str] = &[
    "/tfplugin5.Provider/ReadResource",
    "/tfplugin6.Provider/ReadResource",
];

/// The read call's fields (tfplugin5 and 6 number them alike).
const REQ_TYPE_NAME: u32 = 1;
const REQ_CURRENT_STATE: u32 = 2;
const REQ_PRIVATE: u32 = 3;
const REQ_CURRENT_IDENTITY: u32 = 6;
/// The read answer's fields.
const RESP_NEW_STATE: u32 = 1;
const RESP_PRIVATE: u32 = 3;
const RESP_NEW_IDENTITY: u32 = 5;

/// Whether `path` is the resource read.
pub fn is_read_call(path: &str) -> bool {
    READ_PATHS.contains(&path)
}

/// What the door knows of one cone plan's reads, and what it did with them.
#[derive(Debug, Default)]
pub struct ConeReads {
    answers: ReadAnswers,
    from_records: AtomicUsize,
    to_provider: AtomicUsize,
    refreshed: Mutex<BTreeSet<String>>,
}

impl ConeReads {
    /// The door's reads for a plan whose answers are `answers`.
    pub fn new(answers: ReadAnswers) -> ConeReads {
        ConeReads {
            answers,
            ..ConeReads::default()
        }
    }

    /// How many reads the door answered from their records.
    pub fn from_records(&self) -> usize {
        self.from_records.load(Ordering::Relaxed)
    }

    /// How many reads went to the provider.
    pub fn to_provider(&self) -> usize {
        self.to_provider.load(Ordering::Relaxed)
    }

    /// The objects of the cone the provider read, by instance address.
    pub fn refreshed(&self) -> BTreeSet<String> {
        self.refreshed.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The answer to the read `request` (unframed) from its record, or none when it goes to the provider.
    pub fn answer(&self, request: &[u8]) -> Option<Vec<u8>> {
        let answered = self.answer_from_record(request);
        match &answered {
            Some(_) => self.from_records.fetch_add(1, Ordering::Relaxed),
            None => self.to_provider.fetch_add(1, Ordering::Relaxed),
        };
        answered
    }

    fn answer_from_record(&self, request: &[u8]) -> Option<Vec<u8>> {
        let type_name = field(request, REQ_TYPE_NAME)?;
        let type_name = std::str::from_utf8(&type_name).ok()?;
        let state = field(request, REQ_CURRENT_STATE)?;
        let value = match DynamicValue::decode(state.as_slice())
            .map_err(|e| e.to_string())
            .and_then(|dv| dynamic::to_json(Some(&dv)).map_err(|e| e.to_string()))
        {
            Ok(value) => value,
            Err(e) => {
                tracing::warn!(type_name, error = %e, "provider door: a read's current state could not be read; the provider reads it");
                return None;
            }
        };
        match self.answers.read(type_name, &value) {
            Read::FromRecord => Some(answer(
                &state,
                field(request, REQ_PRIVATE).as_deref(),
                field(request, REQ_CURRENT_IDENTITY).as_deref(),
            )),
            Read::Provider(object) => {
                if let Some(object) = object
                    && let Ok(mut refreshed) = self.refreshed.lock()
                {
                    refreshed.insert(object);
                }
                None
            }
        }
    }
}

/// The length-delimited field `number` of `message`, as it came (none: absent, or a message the door cannot walk).
fn field(message: &[u8], number: u32) -> Option<Vec<u8>> {
    let mut found = None;
    rewrite_field(message, number, |body| {
        found = Some(body.to_vec());
        None
    })
    .ok()?;
    found
}

/// A read's answer: `state` as the new state, `private` and `identity` kept.
fn answer(state: &[u8], private: Option<&[u8]>, identity: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(state.len() + private.map_or(0, <[u8]>::len) + 16);
    for (number, body) in [
        (RESP_NEW_STATE, Some(state)),
        (RESP_PRIVATE, private),
        (RESP_NEW_IDENTITY, identity),
    ] {
        if let Some(body) = body {
            encode_key(number, WireType::LengthDelimited, &mut out);
            encode_varint(body.len() as u64, &mut out);
            out.extend_from_slice(body);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cone::Cone;
    use crate::engine::plan::Plan;
    use crate::frontdoor::provider::proto::tfplugin5::read_resource;
    use serde_json::json;

    fn msgpack(v: &rmpv::Value) -> Vec<u8> {
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, v).unwrap();
        buf
    }

    #[test]
    fn outside_the_cone_the_record_answers() {
        let plan = Plan::from_value(json!({"prior_state": {"values": {"root_module": {"resources": [
            {"address": "aws_ssm_parameter.a", "mode": "managed", "type": "aws_ssm_parameter", "values": {"name": "a"}},
            {"address": "aws_ssm_parameter.b", "mode": "managed", "type": "aws_ssm_parameter", "values": {"name": "b"}}
        ]}}}}))
        .unwrap();
        let cone = Cone {
            inside: ["aws_ssm_parameter.b".to_string()].into(),
            outside: ["aws_ssm_parameter.a".to_string()].into(),
            ..Cone::default()
        };
        let reads = ConeReads::new(ReadAnswers::new(&plan, &cone));
        let request = |name: &str| {
            read_resource::Request {
                type_name: "aws_ssm_parameter".into(),
                current_state: Some(DynamicValue {
                    msgpack: msgpack(&rmpv::Value::Map(vec![(
                        rmpv::Value::from("name"),
                        rmpv::Value::from(name),
                    )])),
                    json: Vec::new(),
                }),
                private: b"{\"schema_version\":\"1\"}".to_vec(),
            }
            .encode_to_vec()
        };
        // a: answered from its record, its state and private data as they came.
        let answered = reads.answer(&request("a")).unwrap();
        let resp = read_resource::Response::decode(answered.as_slice()).unwrap();
        let sent = read_resource::Request::decode(request("a").as_slice()).unwrap();
        assert_eq!(resp.new_state, sent.current_state);
        assert_eq!(resp.private, sent.private);
        assert!(resp.diagnostics.is_empty());
        // b: the provider reads it, and it counts as refreshed.
        assert!(reads.answer(&request("b")).is_none());
        // A state the plan did not have: the provider.
        assert!(reads.answer(&request("c")).is_none());
        // Not a message: the provider.
        assert!(reads.answer(&[0xff, 0xff]).is_none());
        assert_eq!((reads.from_records(), reads.to_provider()), (1, 3));
        assert_eq!(
            reads.refreshed(),
            ["aws_ssm_parameter.b".to_string()].into()
        );
        // An identity, when the call carries one, is answered back.
        let mut with_identity = request("a");
        encode_key(
            REQ_CURRENT_IDENTITY,
            WireType::LengthDelimited,
            &mut with_identity,
        );
        encode_varint(2, &mut with_identity);
        with_identity.extend_from_slice(b"id");
        let answered = reads.answer(&with_identity).unwrap();
        assert_eq!(field(&answered, RESP_NEW_IDENTITY).unwrap(), b"id");
    }
}
