//! The provider's schema: no provider settings, one managed resource `cdftest_thing` (and `cdftest_spare`, in the schema only).

use choudoufu_live::frontdoor::plugin::proto::tfplugin6 as pb;

/// The one resource type.
pub const THING: &str = "cdftest_thing";

/// A second type in the schema, with `cdftest_thing`'s schema, that no fixture uses: what the provider door leaves out of the schema terraform hears.
pub const SPARE: &str = "cdftest_spare";

fn attribute(name: &str, ty: &str, how: How, description: &str) -> pb::schema::Attribute {
    pb::schema::Attribute {
        name: name.to_string(),
        r#type: format!("\"{ty}\"").into_bytes(),
        description: description.to_string(),
        required: how == How::Required,
        optional: how == How::Optional,
        computed: how == How::Computed,
        ..Default::default()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Required,
    Optional,
    Computed,
}

/// The provider's own (empty) configuration block.
pub fn provider() -> pb::Schema {
    pb::Schema {
        version: 0,
        block: Some(pb::schema::Block::default()),
    }
}

/// `cdftest_thing`.
pub fn thing() -> pb::Schema {
    pb::Schema {
        version: 0,
        block: Some(pb::schema::Block {
            version: 0,
            description: "A thing of the project's test provider: every call to it is logged."
                .into(),
            attributes: vec![
                attribute(
                    "name",
                    "string",
                    How::Required,
                    "Its name (a change replaces it).",
                ),
                attribute(
                    "value",
                    "string",
                    How::Optional,
                    "Any value (changed in place).",
                ),
                attribute(
                    "sleep_ms",
                    "number",
                    How::Optional,
                    "How long each apply of it sleeps, in milliseconds (StopProvider cuts it short).",
                ),
                attribute(
                    "fail",
                    "bool",
                    How::Optional,
                    "When true, its create or update fails with an error.",
                ),
                attribute(
                    "id",
                    "string",
                    How::Computed,
                    "Its id, made when it is created.",
                ),
            ],
            ..Default::default()
        }),
    }
}
