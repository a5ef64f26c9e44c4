//! A cone plan's resource reads and plans at the door (`run --refresh=cone`): reads answered from records, changes confirmed against the cloud.
//!
//! Terraform's `ReadResource` carries the object's current state (its record's, upgraded) and
//! private data. When the [`Watch`] says so, the door answers with exactly those, and its
//! identity when the call carries one, as a read that found no drift answers; no provider call
//! is made. It keeps the call, and the connection it came on. When the object's plan
//! (`PlanResourceChange`) then changes it, or it depends on a change, the door sends the kept
//! calls of it and of the dependencies it read to the provider before terraform hears the
//! plan, and compares each answer with the record. Every answer the provider gives is kept by
//! address, so a plan made again after a drift answers those reads from it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};
use tokio::sync::OnceCell;

use super::dynamic;
use super::proto::tfplugin5::diagnostic::Severity;
use super::proto::tfplugin5::{DynamicValue, plan_resource_change, read_resource};
use super::unary::{self, Body};
use super::wire::rewrite_field;
use crate::engine::cone::{ObjectId, Outcome, Read, Watch, last_refresh, same_state};
use crate::engine::session::Snapshot;

/// The gRPC paths of the resource read, in protocols 5 and 6.
const READ_PATHS: &[&str] = &[
    "/tfplugin5.Provider/ReadResource",
    "/tfplugin6.Provider/ReadResource",
];

/// The gRPC paths of the resource plan, in protocols 5 and 6.
const PLAN_PATHS: &[&str] = &[
    "/tfplugin5.Provider/PlanResourceChange",
    "/tfplugin6.Provider/PlanResourceChange",
];

/// How long the door waits for a read of its own.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

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

/// Whether `path` is the resource plan.
pub fn is_plan_call(path: &str) -> bool {
    PLAN_PATHS.contains(&path)
}

/// What the door does with one read.
pub enum ReadStep {
    /// Answer terraform with this message.
    Answer(Vec<u8>),
    /// Send it to the provider; give its answer to [`ConeReads::provider_answered`] for this object.
    Provider(Option<ObjectId>),
}

/// A read answered from its record, kept to be sent to the provider if its object's plan needs it.
struct Kept {
    sender: SendRequest<Body>,
    path: String,
    request: Bytes,
    state: serde_json::Value,
}

/// The records terraform was served, read once the first resource read comes (terraform reads its state before any).
pub type Records = Box<dyn Fn() -> BoxFuture<'static, Snapshot> + Send + Sync>;

/// How a cone plan's [`Watch`] is made from the records: the time now (Unix seconds), the maximum age, and the objects read again from the cloud.
#[derive(Clone, Debug)]
pub struct WatchParams {
    /// The time now, Unix seconds.
    pub now: i64,
    /// How long a record may go unrefreshed.
    pub max_age: Duration,
    /// The objects the run read from the cloud already.
    pub read_again: BTreeSet<String>,
}

/// What the door knows of one cone plan's reads and plans, and what it did with them.
pub struct ConeReads {
    records: Records,
    params: WatchParams,
    watch: OnceCell<Mutex<Watch>>,
    kept: Mutex<HashMap<ObjectId, Kept>>,
    fresh: Mutex<BTreeMap<String, Bytes>>,
    from_records: AtomicUsize,
    to_provider: AtomicUsize,
}

impl ConeReads {
    /// The door's reads for a plan over `records`, decided as `params` say, with `fresh` the provider's read answers the run holds already, by address.
    pub fn new(records: Records, params: WatchParams, fresh: BTreeMap<String, Bytes>) -> ConeReads {
        ConeReads {
            records,
            params,
            watch: OnceCell::new(),
            kept: Mutex::new(HashMap::new()),
            fresh: Mutex::new(fresh),
            from_records: AtomicUsize::new(0),
            to_provider: AtomicUsize::new(0),
        }
    }

    /// How many reads the door answered from their records.
    pub fn from_records(&self) -> usize {
        self.from_records.load(Ordering::Relaxed)
    }

    /// How many reads the provider made (terraform's, and the door's own).
    pub fn to_provider(&self) -> usize {
        self.to_provider.load(Ordering::Relaxed)
    }

    /// The plan's watch, made from the records at the first read.
    async fn watch(&self) -> &Mutex<Watch> {
        self.watch
            .get_or_init(|| async {
                let snapshot = (self.records)().await;
                let last = last_refresh(&snapshot);
                let p = &self.params;
                Mutex::new(Watch::new(
                    &snapshot,
                    &last,
                    p.now,
                    p.max_age,
                    p.read_again.clone(),
                ))
            })
            .await
    }

    /// The watch, when a read made it.
    fn made(&self) -> Option<std::sync::MutexGuard<'_, Watch>> {
        self.watch.get().and_then(|w| w.lock().ok())
    }

    /// What the plan's reads came to.
    pub fn outcome(&self) -> Outcome {
        self.made().map(|w| w.outcome()).unwrap_or_default()
    }

    /// The provider's read answers of this run, by address.
    pub fn fresh(&self) -> BTreeMap<String, Bytes> {
        self.fresh.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// What to do with the read `request` (unframed) that came on `sender` for `path`.
    pub async fn read(&self, request: &Bytes, sender: &SendRequest<Body>, path: &str) -> ReadStep {
        self.watch().await;
        let step = self.decide_read(request, sender, path);
        match &step {
            ReadStep::Answer(_) => self.from_records.fetch_add(1, Ordering::Relaxed),
            ReadStep::Provider(_) => self.to_provider.fetch_add(1, Ordering::Relaxed),
        };
        step
    }

    fn decide_read(&self, request: &Bytes, sender: &SendRequest<Body>, path: &str) -> ReadStep {
        let Some((type_name, state, value)) = typed_state(request, REQ_CURRENT_STATE) else {
            return ReadStep::Provider(None);
        };
        let Some(mut watch) = self.made() else {
            return ReadStep::Provider(None);
        };
        match watch.read(&type_name, &value) {
            Read::FromRecord(id) => {
                if let Ok(mut kept) = self.kept.lock() {
                    kept.insert(
                        id,
                        Kept {
                            sender: sender.clone(),
                            path: path.to_string(),
                            request: request.clone(),
                            state: value,
                        },
                    );
                }
                ReadStep::Answer(answer(
                    &state,
                    field(request, REQ_PRIVATE).as_deref(),
                    field(request, REQ_CURRENT_IDENTITY).as_deref(),
                ))
            }
            Read::Fresh(id) => {
                let held = self
                    .fresh
                    .lock()
                    .ok()
                    .and_then(|f| f.get(watch.address(id)).cloned());
                match held {
                    Some(answer) => {
                        if let Some(now) = answered_state(&answer) {
                            watch.alias(&type_name, &now, id);
                        }
                        ReadStep::Answer(answer.to_vec())
                    }
                    None => ReadStep::Provider(Some(id)),
                }
            }
            Read::Provider(object) => ReadStep::Provider(object),
        }
    }

    /// The provider answered a read of `object` (its `request`) with `answer` (both unframed): kept for a plan made again.
    pub fn provider_answered(&self, object: ObjectId, request: &[u8], answer: &[u8]) {
        let Some(mut watch) = self.made() else {
            return;
        };
        if let (Some(type_name), Some(now)) = (
            field(request, REQ_TYPE_NAME).and_then(|t| String::from_utf8(t).ok()),
            answered_state(answer),
        ) {
            watch.alias(&type_name, &now, object);
        }
        if let Ok(mut fresh) = self.fresh.lock() {
            fresh.insert(
                watch.address(object).to_string(),
                Bytes::copy_from_slice(answer),
            );
        }
    }

    /// A plan call `request` was answered with `answer` (both unframed): when it changes its object, or depends on a change, read that object and the dependencies it read from the cloud, and compare each with its record.
    pub async fn planned(&self, request: &[u8], answer: &[u8]) {
        let Some(confirm) = self.to_confirm(request, answer) else {
            return;
        };
        for id in confirm {
            let kept = self.kept.lock().ok().and_then(|k| {
                k.get(&id).map(|k| {
                    (
                        k.sender.clone(),
                        k.path.clone(),
                        k.request.clone(),
                        k.state.clone(),
                    )
                })
            });
            let same = match kept {
                Some((sender, path, request, state)) => {
                    self.to_provider.fetch_add(1, Ordering::Relaxed);
                    self.read_again(id, &sender, &path, &request, &state).await
                }
                None => false,
            };
            if let Some(mut watch) = self.made() {
                watch.verified(id, same);
            }
        }
    }

    /// The objects a plan call asks to confirm, none when it asks none (or cannot be read).
    fn to_confirm(&self, request: &[u8], answer: &[u8]) -> Option<Vec<ObjectId>> {
        let request = plan_resource_change::Request::decode(request).ok()?;
        let answer = plan_resource_change::Response::decode(answer).ok()?;
        let prior = dynamic::to_json(request.prior_state.as_ref()).ok()?;
        if prior.is_null() {
            return None;
        }
        let changed = changes(&request, &answer);
        let mut watch = self.made()?;
        Some(watch.planned(&request.type_name, &prior, changed))
    }

    /// Send the kept read of `id` to the provider: whether it gives back the record's `state`.
    async fn read_again(
        &self,
        id: ObjectId,
        sender: &SendRequest<Body>,
        path: &str,
        request: &[u8],
        state: &serde_json::Value,
    ) -> bool {
        let address = self
            .made()
            .map(|w| w.address(id).to_string())
            .unwrap_or_default();
        let answer = match unary::call(sender, path, request, READ_TIMEOUT).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(%address, error = %e, "cone plan: the provider could not read a changed object again; it counts as drifted");
                return false;
            }
        };
        let Ok(read) = read_resource::Response::decode(answer.as_ref()) else {
            return false;
        };
        if read
            .diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error as i32)
        {
            tracing::warn!(%address, "cone plan: the provider's read of a changed object failed; it counts as drifted");
            return false;
        }
        if let Ok(mut fresh) = self.fresh.lock() {
            fresh.insert(address.clone(), answer.clone());
        }
        let now = dynamic::to_json(read.new_state.as_ref()).ok();
        if let (Some(now), Some(type_name), Some(mut watch)) = (
            &now,
            field(request, REQ_TYPE_NAME).and_then(|t| String::from_utf8(t).ok()),
            self.made(),
        ) {
            watch.alias(&type_name, now, id);
        }
        let same = now.as_ref().is_some_and(|now| same_state(now, state));
        if !same {
            tracing::info!(%address, "cone plan: a changed object's record differs from the cloud");
        }
        same
    }
}

/// The new state of a read's `answer` (unframed), as JSON.
fn answered_state(answer: &[u8]) -> Option<serde_json::Value> {
    let read = read_resource::Response::decode(answer).ok()?;
    dynamic::to_json(read.new_state.as_ref()).ok()
}

/// Whether a plan answer changes its object: a planned state other than the prior one, or a replacement.
fn changes(
    request: &plan_resource_change::Request,
    answer: &plan_resource_change::Response,
) -> bool {
    if !answer.requires_replace.is_empty() {
        return true;
    }
    let (Some(prior), Some(planned)) = (&request.prior_state, &answer.planned_state) else {
        return true;
    };
    if prior == planned {
        return false;
    }
    let prior = dynamic::to_json_and_unknowns(Some(prior));
    let planned = dynamic::to_json_and_unknowns(Some(planned));
    match (prior, planned) {
        (Ok(prior), Ok(planned)) => prior != planned,
        _ => true,
    }
}

/// A read call's type name, its current state field as it came, and that state as JSON.
fn typed_state(request: &[u8], number: u32) -> Option<(String, Vec<u8>, serde_json::Value)> {
    let type_name = field(request, REQ_TYPE_NAME)?;
    let type_name = String::from_utf8(type_name).ok()?;
    let state = field(request, number)?;
    match DynamicValue::decode(state.as_slice())
        .map_err(|e| e.to_string())
        .and_then(|dv| dynamic::to_json(Some(&dv)).map_err(|e| e.to_string()))
    {
        Ok(value) => Some((type_name, state, value)),
        Err(e) => {
            tracing::warn!(type_name, error = %e, "provider door: a read's current state could not be read; the provider reads it");
            None
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
    use crate::frontdoor::provider::proto::tfplugin5::AttributePath;

    fn msgpack(v: &rmpv::Value) -> DynamicValue {
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, v).unwrap();
        DynamicValue {
            msgpack: buf,
            json: Vec::new(),
        }
    }

    fn object(pairs: &[(&str, rmpv::Value)]) -> rmpv::Value {
        rmpv::Value::Map(
            pairs
                .iter()
                .map(|(k, v)| (rmpv::Value::from(*k), v.clone()))
                .collect(),
        )
    }

    fn plan(prior: &rmpv::Value, planned: &rmpv::Value) -> bool {
        let request = plan_resource_change::Request {
            type_name: "aws_ssm_parameter".into(),
            prior_state: Some(msgpack(prior)),
            proposed_new_state: None,
        };
        let answer = plan_resource_change::Response {
            planned_state: Some(msgpack(planned)),
            requires_replace: Vec::new(),
            diagnostics: Vec::new(),
        };
        changes(&request, &answer)
    }

    #[test]
    fn a_plan_changes_its_object_when_its_state_or_replacement_says_so() {
        let a = object(&[("v", "1".into()), ("n", rmpv::Value::Nil)]);
        assert!(!plan(&a, &a));
        assert!(plan(
            &a,
            &object(&[("v", "2".into()), ("n", rmpv::Value::Nil)])
        ));
        // An unknown where the prior state had null is a change, though both read as null.
        let unknown = rmpv::Value::Ext(0, vec![0]);
        assert!(plan(&a, &object(&[("v", "1".into()), ("n", unknown)])));
        // A replacement is a change whatever the states say.
        let request = plan_resource_change::Request {
            type_name: "t".into(),
            prior_state: Some(msgpack(&a)),
            proposed_new_state: None,
        };
        let answer = plan_resource_change::Response {
            planned_state: Some(msgpack(&a)),
            requires_replace: vec![AttributePath { steps: Vec::new() }],
            diagnostics: Vec::new(),
        };
        assert!(changes(&request, &answer));
    }

    #[test]
    fn a_record_answers_with_its_state_private_data_and_identity() {
        let state = msgpack(&object(&[("v", "1".into())])).encode_to_vec();
        let answered = answer(&state, Some(b"{\"schema_version\":\"1\"}"), Some(b"id"));
        let resp = read_resource::Response::decode(answered.as_slice()).unwrap();
        assert_eq!(resp.new_state.unwrap().encode_to_vec(), state);
        assert_eq!(resp.private, b"{\"schema_version\":\"1\"}");
        assert!(resp.diagnostics.is_empty());
        assert_eq!(field(&answered, RESP_NEW_IDENTITY).unwrap(), b"id");
        assert_eq!(
            answered_state(&answered),
            Some(serde_json::json!({"v": "1"}))
        );
        // Not a message: nothing read.
        assert!(typed_state(&[0xff, 0xff], REQ_CURRENT_STATE).is_none());
    }
}
