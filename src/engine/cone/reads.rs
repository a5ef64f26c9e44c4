//! Which resource reads of the real plan the door answers from their records.
//!
//! A provider's read call names the resource type and the object's current state, not its
//! address. The plan without a refresh holds every object's state as the real plan sends it,
//! so a read is known by its type and the digest of its state: answered from the record when
//! that state is an object outside the cone's, and no object inside the cone has the same
//! state. Any other read (a state no object has, an import's, an object in the cone) goes to
//! the provider.

use std::collections::HashMap;

use super::decide::Cone;
use crate::engine::digest::value_digest;
use crate::engine::plan::{Mode, Plan};

/// What the door does with one resource read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// Answer it with the state and private data it carries: the object's record, unrefreshed.
    FromRecord,
    /// Send it to the provider; the object in the cone it is for, when the state names one.
    Provider(Option<String>),
}

/// The reads of one cone plan the door answers from the records, by resource type and state digest.
#[derive(Clone, Debug, Default)]
pub struct ReadAnswers {
    by_state: HashMap<(String, String), Read>,
}

impl ReadAnswers {
    /// The answers for the real plan after `plan` (the plan without a refresh) and its `cone`.
    pub fn new(plan: &Plan, cone: &Cone) -> ReadAnswers {
        let mut by_state: HashMap<(String, String), Read> = HashMap::new();
        let Some(root) = plan.prior_root() else {
            return ReadAnswers::default();
        };
        root.walk(&mut |r| {
            let (Mode::Managed, Some(address), Some(type_name)) =
                (r.mode, &r.address, &r.type_name)
            else {
                return;
            };
            let object = match &r.deposed_key {
                Some(key) => format!("{address} (deposed {key})"),
                None => address.clone(),
            };
            let key = (type_name.clone(), value_digest(&r.values));
            let read = if cone.outside.contains(&object) {
                Read::FromRecord
            } else {
                Read::Provider(Some(object))
            };
            let merged = match (by_state.remove(&key), read) {
                (None | Some(Read::FromRecord), read) => read,
                // The same state inside and outside the cone: the provider reads it.
                (Some(held), Read::FromRecord) => held,
                // Two objects of the cone with one state: no one address.
                (Some(Read::Provider(_)), Read::Provider(_)) => Read::Provider(None),
            };
            by_state.insert(key, merged);
        });
        ReadAnswers { by_state }
    }

    /// What to do with a read of a `type_name` object whose current state is `state` (JSON, as the state holds it).
    pub fn read(&self, type_name: &str, state: &serde_json::Value) -> Read {
        self.by_state
            .get(&(type_name.to_string(), value_digest(state)))
            .cloned()
            .unwrap_or(Read::Provider(None))
    }

    /// How many distinct states it answers from the records.
    pub fn from_records(&self) -> usize {
        self.by_state
            .values()
            .filter(|r| **r == Read::FromRecord)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn plan() -> Plan {
        let p = |name: &str, value: &str| {
            json!({"address": format!("aws_ssm_parameter.{name}"), "mode": "managed",
                   "type": "aws_ssm_parameter", "values": {"name": name, "value": value}})
        };
        let twin = |name: &str| {
            json!({"address": format!("terraform_data.{name}"), "mode": "managed",
                   "type": "terraform_data", "values": {"input": "same"}})
        };
        Plan::from_value(
            json!({"prior_state": {"values": {"root_module": {"resources": [
                p("a", "1"), p("b", "2"), twin("in"), twin("out"),
                {"address": "aws_ssm_parameter.a", "mode": "managed", "type": "aws_ssm_parameter",
                 "deposed_key": "00aa", "values": {"name": "a", "value": "0"}},
                {"address": "data.aws_ssm_parameter.a", "mode": "data", "type": "aws_ssm_parameter",
                 "values": {"name": "a", "value": "1"}}
            ]}}}}),
        )
        .unwrap()
    }

    #[test]
    fn a_read_is_known_by_its_type_and_state() {
        let cone = Cone {
            inside: [
                "aws_ssm_parameter.b",
                "terraform_data.in",
                "aws_ssm_parameter.a (deposed 00aa)",
            ]
            .map(String::from)
            .into(),
            outside: ["aws_ssm_parameter.a", "terraform_data.out"]
                .map(String::from)
                .into(),
            ..Cone::default()
        };
        let answers = ReadAnswers::new(&plan(), &cone);
        let read = |t: &str, v: serde_json::Value| answers.read(t, &v);
        // Outside: from the record. Key order does not matter.
        assert_eq!(
            read("aws_ssm_parameter", json!({"value": "1", "name": "a"})),
            Read::FromRecord
        );
        // Inside: the provider, for that object.
        assert_eq!(
            read("aws_ssm_parameter", json!({"name": "b", "value": "2"})),
            Read::Provider(Some("aws_ssm_parameter.b".into()))
        );
        // A deposed object of the cone goes to the provider.
        assert_eq!(
            read("aws_ssm_parameter", json!({"name": "a", "value": "0"})),
            Read::Provider(Some("aws_ssm_parameter.a (deposed 00aa)".into()))
        );
        // A state no object has (drifted? an import's) goes to the provider.
        assert_eq!(
            read("aws_ssm_parameter", json!({"name": "a", "value": "9"})),
            Read::Provider(None)
        );
        // The same state in another type is another read.
        assert_eq!(
            read("aws_other", json!({"name": "a", "value": "1"})),
            Read::Provider(None)
        );
        // One state inside and outside the cone: the provider reads it.
        assert_eq!(
            read("terraform_data", json!({"input": "same"})),
            Read::Provider(Some("terraform_data.in".into()))
        );
        assert_eq!(answers.from_records(), 1);
        let _: BTreeSet<String> = cone.inside;
    }
}
