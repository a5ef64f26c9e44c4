//! The live protocol's requests checked before any store call: each field that names something must parse.
//!
//! Pure functions of the request, so `fuzz/fuzz_targets/live_request.rs` can throw any bytes
//! at them. A refusal names the field (`writes[2].address`) and says what a valid value looks like.

use std::fmt;

use thiserror::Error;

use super::super::proto::live as pb;
use crate::cut::{Mechanism, cut};
use crate::engine::address::{Address, AddressError, check_output, check_provider};
use crate::engine::layout::EstateName;
use crate::engine::operation::{Operation, UnknownOperation};
use crate::engine::write::Change;
use crate::engine::write::records::{Kind, RecordWrite};
use crate::store::{Precondition, Version};

/// Longest address accepted; terraform's own are far shorter, and a longer one is stored under its digest anyway.
pub const MAX_ADDRESS: usize = 4096;
/// Longest run ID accepted.
pub const MAX_RUN_ID: usize = 128;
/// The operations a pending mark may name.
pub const OPERATIONS: &[&str] = &["create", "update", "delete", "replace"];

/// A request field that is wrong: which one, and why. Nothing was read or written.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("field `{field}`: {message}; nothing was read or written")]
pub struct FieldError {
    /// The field, e.g. `writes[2].address`.
    pub field: String,
    /// What is wrong and what a valid value looks like.
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A value shown in a message: quoted and cut short, so a hostile one cannot flood the answer.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 120;
        match self.0.char_indices().nth(SHOWN) {
            Some((cut_at, _)) => write!(f, "{:?}...", &self.0[..cut_at]),
            None => write!(f, "{:?}", self.0),
        }
    }
}

fn checked(
    field: &str,
    value: &str,
    what: &str,
    example: &str,
    parse: impl FnOnce(&str) -> Result<(), AddressError>,
) -> Result<(), FieldError> {
    let refuse = |why: &str| {
        FieldError::new(
            field,
            format!("{} is not {what} ({why}); e.g. {example}", Shown(value)),
        )
    };
    if value.is_empty() {
        return Err(refuse("it is empty"));
    }
    if value.len() > MAX_ADDRESS {
        return Err(refuse(&format!("it is over {MAX_ADDRESS} bytes")));
    }
    parse(value).map_err(|AddressError(why)| refuse(why))
}

/// A resource instance address as terraform prints it: `module.m["k"].aws_instance.web[0]`, `data.x.y`, with ` (deposed KEY)` for a deposed object.
pub fn resource_address(field: &str, value: &str) -> Result<(), FieldError> {
    checked(
        field,
        value,
        "a resource instance address",
        "aws_instance.web[\"a\"] or module.net[0].aws_subnet.b",
        |v| Address::parse(v).map(|_| ()),
    )
}

/// A root output's name: an identifier.
pub fn output_name(field: &str, value: &str) -> Result<(), FieldError> {
    checked(field, value, "an output name", "\"endpoint\"", check_output)
}

/// A provider configuration address: `provider["registry.terraform.io/hashicorp/aws"]`, with `.ALIAS` and a module path.
pub fn provider_address(field: &str, value: &str) -> Result<(), FieldError> {
    checked(
        field,
        value,
        "a provider configuration address",
        "provider[\"registry.terraform.io/hashicorp/aws\"].west",
        check_provider,
    )
}

/// The address of a record of `kind`.
pub fn record_address(field: &str, kind: Kind, value: &str) -> Result<(), FieldError> {
    if cut(Mechanism::RequestValidation) {
        return Ok(());
    }
    match kind {
        Kind::Resource => resource_address(field, value),
        Kind::Output => output_name(field, value),
        Kind::Provider => provider_address(field, value),
    }
}

fn resource(field: &str, value: &str) -> Result<(), FieldError> {
    record_address(field, Kind::Resource, value)
}

/// The estate a Configure request names.
pub fn estate(value: &str) -> Result<EstateName, FieldError> {
    EstateName::parse(value).map_err(|m| FieldError::new("estate", m))
}

/// A Configure request's estate and run ID.
pub fn configure(req: &pb::ConfigureRequest) -> Result<EstateName, FieldError> {
    let estate = estate(&req.estate)?;
    let id = &req.run_id;
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !cut(Mechanism::RequestValidation)
        && !id.is_empty()
        && (id.len() > MAX_RUN_ID || !id.chars().all(ok_char))
    {
        return Err(FieldError::new(
            "run_id",
            format!(
                "{} is not a run ID: leave it empty for the plugin to make one, or use up to {MAX_RUN_ID} letters, digits, '.', '_' or '-'",
                Shown(id)
            ),
        ));
    }
    Ok(estate)
}

fn version(v: Option<&pb::Version>) -> Option<Version> {
    v.filter(|v| !v.token.is_empty()).map(|v| Version {
        token: v.token.clone(),
        version_id: Some(v.version_id.clone()).filter(|s| !s.is_empty()),
    })
}

fn kind(k: i32) -> Option<Kind> {
    match pb::RecordKind::try_from(k).ok()? {
        pb::RecordKind::Resource => Some(Kind::Resource),
        pb::RecordKind::Output => Some(Kind::Output),
        pb::RecordKind::Provider => Some(Kind::Provider),
        pb::RecordKind::Unspecified => None,
    }
}

/// A WriteRecords request as record writes: every write's kind, op, address, version and content checked.
pub fn write_records(req: pb::WriteRecordsRequest) -> Result<Vec<RecordWrite>, FieldError> {
    let mut writes = Vec::with_capacity(req.writes.len());
    for (i, w) in req.writes.into_iter().enumerate() {
        let field = |name: &str| format!("writes[{i}].{name}");
        let Some(kind) = kind(w.kind) else {
            return Err(FieldError::new(
                field("kind"),
                "the record kind is not set: RESOURCE, OUTPUT or PROVIDER",
            ));
        };
        record_address(&field("address"), kind, &w.address)?;
        let content = || {
            serde_json::from_slice::<serde_json::Value>(&w.content)
                .map_err(|e| FieldError::new(field("content"), format!("not JSON: {e}")))
        };
        let expected = || {
            version(w.expected.as_ref()).ok_or_else(|| {
                FieldError::new(
                    field("expected"),
                    "an update or delete needs the version this run read",
                )
            })
        };
        let change = match pb::record_write::Op::try_from(w.op)
            .unwrap_or(pb::record_write::Op::Unspecified)
        {
            pb::record_write::Op::Create => Change::Put {
                body: content()?,
                precondition: Precondition::Absent,
            },
            pb::record_write::Op::Update => Change::Put {
                precondition: Precondition::Matches(expected()?),
                body: content()?,
            },
            pb::record_write::Op::Delete => Change::Delete {
                expected: expected()?,
            },
            pb::record_write::Op::Unspecified => {
                return Err(FieldError::new(
                    field("op"),
                    "the operation is not set: CREATE, UPDATE or DELETE",
                ));
            }
        };
        writes.push(RecordWrite {
            address: w.address,
            kind,
            change,
            undeclared: w.undeclared,
        });
    }
    Ok(writes)
}

/// A BeginChange request: its address, operation and every dependency.
pub fn begin_change(req: &pb::BeginChangeRequest) -> Result<(), FieldError> {
    resource("address", &req.address)?;
    if !cut(Mechanism::RequestValidation) && !OPERATIONS.contains(&req.operation.as_str()) {
        return Err(FieldError::new(
            "operation",
            format!(
                "{} is not an operation: {}",
                Shown(&req.operation),
                OPERATIONS.join(", ")
            ),
        ));
    }
    for (i, d) in req.dependencies.iter().enumerate() {
        resource(&format!("dependencies[{i}]"), d)?;
    }
    Ok(())
}

/// A BeginChange request's operation, parsed (any operation the engine knows when request validation is cut).
pub fn operation(req: &pb::BeginChangeRequest) -> Result<Operation, FieldError> {
    req.operation.parse().map_err(|e: UnknownOperation| {
        FieldError::new("operation", format!("{} is {e}", Shown(&req.operation)))
    })
}

/// A CheckPlan request: every changed address and output.
pub fn check_plan(req: &pb::CheckPlanRequest) -> Result<(), FieldError> {
    for (i, a) in req.changed_addresses.iter().enumerate() {
        resource(&format!("changed_addresses[{i}]"), a)?;
    }
    for (i, o) in req.changed_outputs.iter().enumerate() {
        record_address(&format!("changed_outputs[{i}]"), Kind::Output, o)?;
    }
    Ok(())
}

/// An InjectMarkers request's address.
pub fn inject_markers(req: &pb::InjectMarkersRequest) -> Result<(), FieldError> {
    resource("address", &req.address)
}

/// A FindByMarkers request's address.
pub fn find_by_markers(req: &pb::FindByMarkersRequest) -> Result<(), FieldError> {
    resource("address", &req.address)
}

/// A ListUnrecorded request's provider configuration addresses.
pub fn list_unrecorded(req: &pb::ListUnrecordedRequest) -> Result<(), FieldError> {
    for (i, p) in req.providers.iter().enumerate() {
        record_address(
            &format!("providers[{i}].address"),
            Kind::Provider,
            &p.address,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_terraform_prints_parse() {
        for a in [
            "aws_instance.web",
            "terraform_data.x[0]",
            "aws_instance.web[\"a b\"]",
            "aws_instance.web[\"q\\\"uote\\\\ $${x} \\u00e9\"]",
            "module.net[0].module.sub[\"k\"].aws_subnet.b[-1]",
            "module.data.data.aws_ami.latest",
            "terraform_data.cbd (deposed 0a1b2c3d)",
            "my-type.my-name",
        ] {
            resource_address("address", a).unwrap_or_else(|e| panic!("{a}: {e}"));
        }
        for p in [
            "provider[\"registry.terraform.io/hashicorp/aws\"]",
            "provider[\"registry.terraform.io/hashicorp/aws\"].west",
            "module.m.provider[\"terraform.io/builtin/terraform\"]",
        ] {
            provider_address("address", p).unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        output_name("o", "endpoint_url").unwrap();
    }

    #[test]
    fn addresses_that_do_not_parse_are_refused_by_field() {
        for a in [
            "",
            "web",
            "aws_instance.",
            ".web",
            "aws_instance.web[",
            "aws_instance.web[\"open]",
            "aws_instance.web[1.5]",
            "aws_instance.web extra",
            "../../etc/passwd",
            "a/b.c",
            "aws_instance.web[\"\u{0}\"]",
            "module.m.aws_instance",
            "terraform_data.cbd (deposed )",
        ] {
            let e = resource_address("writes[3].address", a).unwrap_err();
            assert_eq!(e.field, "writes[3].address", "{a}");
            assert!(e.to_string().contains("nothing was read or written"));
        }
        assert!(resource_address("a", &format!("t.{}", "n".repeat(MAX_ADDRESS))).is_err());
        assert!(output_name("o", "a.b").is_err());
        assert!(provider_address("p", "provider.aws").is_err());
        // A hostile value is shown cut short.
        let e = resource_address("address", &"/".repeat(3000)).unwrap_err();
        assert!(e.message.len() < 400, "{}", e.message.len());
    }

    #[test]
    fn estates_and_run_ids_are_checked() {
        let req = |estate: &str, run_id: &str| pb::ConfigureRequest {
            estate: estate.into(),
            run_id: run_id.into(),
            ..Default::default()
        };
        assert!(configure(&req("prod", "")).is_ok());
        for bad in ["", "a/b", "..", &"x".repeat(64), "prod@ws"] {
            assert_eq!(configure(&req(bad, "")).unwrap_err().field, "estate");
        }
        assert_eq!(configure(&req("prod", "a/b")).unwrap_err().field, "run_id");
        assert_eq!(
            configure(&req("prod", &"r".repeat(129))).unwrap_err().field,
            "run_id"
        );
    }

    #[test]
    fn writes_name_the_field_that_is_wrong() {
        let w = |kind: pb::RecordKind, op: pb::record_write::Op, address: &str| pb::RecordWrite {
            address: address.into(),
            kind: kind as i32,
            op: op as i32,
            content: b"{}".to_vec(),
            ..Default::default()
        };
        use pb::RecordKind as K;
        use pb::record_write::Op;
        let req = |writes| pb::WriteRecordsRequest { writes };
        let field = |r| write_records(r).unwrap_err().field;
        assert_eq!(
            field(req(vec![
                w(K::Resource, Op::Create, "t.a"),
                w(K::Resource, Op::Create, "t")
            ])),
            "writes[1].address"
        );
        assert_eq!(
            field(req(vec![w(K::Unspecified, Op::Create, "t.a")])),
            "writes[0].kind"
        );
        assert_eq!(
            field(req(vec![w(K::Resource, Op::Unspecified, "t.a")])),
            "writes[0].op"
        );
        assert_eq!(
            field(req(vec![w(K::Resource, Op::Update, "t.a")])),
            "writes[0].expected"
        );
        let mut bad_json = w(K::Output, Op::Create, "o");
        bad_json.content = b"{".to_vec();
        assert_eq!(field(req(vec![bad_json])), "writes[0].content");
        assert!(write_records(req(vec![w(K::Output, Op::Create, "o")])).is_ok());
    }
}
