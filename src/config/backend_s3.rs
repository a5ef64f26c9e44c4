//! `backend "s3"` as `run` serves it: where terraform keeps its states (bucket, key, workspace
//! prefix), the record store that the same bucket becomes, and the settings `run` gives
//! terraform itself, refused wherever else they are set.

use std::path::Path;

use hcl::edit::Span;
use hcl::edit::structure::BlockLabel;

use super::error::ConfigError;
use super::files::{Ctx, at, parse_file, tf_files};
use super::live::LiveConfig;
use super::stored::{read_stored_backend, stored_backend_file};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::EstateName;
use crate::store::StoreSettings;
use crate::store::s3::S3Settings;

/// terraform's default `workspace_key_prefix`.
pub const DEFAULT_WORKSPACE_PREFIX: &str = "env:";

/// The s3 backend settings `run` gives terraform itself (its door's endpoint and credentials),
/// and the locks and roles that would take terraform elsewhere; set in the block or stored by
/// `init -backend-config`, they are refused by name.
pub const S3_SETTINGS_RUN_SETS: [&str; 15] = [
    "endpoint",
    "endpoints",
    "sts_endpoint",
    "iam_endpoint",
    "dynamodb_endpoint",
    "access_key",
    "secret_key",
    "token",
    "shared_credentials_file",
    "shared_credentials_files",
    "shared_config_files",
    "assume_role_with_web_identity",
    "role_arn",
    "dynamodb_table",
    "custom_ca_bundle",
];

/// A root's `backend "s3"` block, as `run` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Backend {
    /// `bucket`: where terraform keeps its states, and the record store.
    pub bucket: String,
    /// `key`: the default workspace's state object.
    pub key: String,
    /// `workspace_key_prefix` (default `env:`).
    pub workspace_key_prefix: String,
    /// `region`, if set (else the standard AWS environment's).
    pub region: Option<String>,
    /// `use_path_style` (or the older `force_path_style`), if set.
    pub use_path_style: Option<bool>,
    /// `kms_key_id`, if set: the records are encrypted with it too.
    pub kms_key_id: Option<String>,
    /// `profile`, if set: the record store's credentials come from it.
    pub profile: Option<String>,
    /// `assume_role`'s `role_arn`, if set: the record store assumes it.
    pub role_arn: Option<String>,
    /// `file:line` of the block.
    pub at: String,
}

impl S3Backend {
    /// The root's `backend "s3"` block; none when the root has another backend or none.
    pub fn find(root: &Path) -> Result<Option<S3Backend>, ConfigError> {
        for (path, text) in tf_files(root)? {
            let body = parse_file(&path, &text)?;
            let file = path.display().to_string();
            let ctx = Ctx {
                file: &file,
                text: &text,
            };
            for tf in body.get_blocks("terraform") {
                if let Some(backend) = tf.body.get_blocks("backend").next() {
                    let kind = match backend.labels.first() {
                        Some(BlockLabel::String(s)) => s.value().to_string(),
                        Some(BlockLabel::Ident(i)) => i.as_str().to_string(),
                        None => String::new(),
                    };
                    if kind != "s3" {
                        return Ok(None);
                    }
                    return read_block(&ctx, &backend.body, backend.span()).map(Some);
                }
            }
        }
        Ok(None)
    }

    /// The estate of the `default` workspace: named from the key (its `/` as `-`, other
    /// characters an estate name cannot hold as `_`, at most 63 characters).
    pub fn estate(&self) -> Result<EstateName, ConfigError> {
        let mut name: String = self
            .key
            .chars()
            .map(|c| match c {
                '/' => '-',
                c if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => c,
                _ => '_',
            })
            .collect();
        while name.starts_with(|c: char| !c.is_ascii_alphanumeric()) {
            name.remove(0);
        }
        name.truncate(63);
        EstateName::parse(&name).map_err(|message| ConfigError::Invalid {
            at: self.at.clone(),
            message: format!(
                "backend \"s3\" key {:?} makes no estate name ({message}); add a live.hcl with an estate",
                self.key
            ),
        })
    }

    /// The record store: the backend's own bucket, its endpoint from the standard AWS
    /// environment (`AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`), as the user's process sees it.
    pub fn store(&self) -> StoreSettings {
        let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|e| !e.is_empty()));
        StoreSettings::S3(S3Settings {
            bucket: self.bucket.clone(),
            region: self.region.clone(),
            endpoint,
            use_path_style: self.use_path_style,
            kms_key_id: self.kms_key_id.clone(),
            skip_bucket_checks: false,
            profile: self
                .profile
                .clone()
                .filter(|_| !cut(Mechanism::S3BlockCredentials)),
            role_arn: self
                .role_arn
                .clone()
                .filter(|_| !cut(Mechanism::S3BlockCredentials)),
        })
    }
}

/// A root's settings: its live block, else (for a root whose backend is `s3`) the backend's
/// bucket as the record store and the `default` workspace's estate named from its key.
pub fn root_config(root: &Path) -> Result<LiveConfig, ConfigError> {
    match LiveConfig::load(root) {
        Err(ConfigError::NoLiveBlock { .. }) => match S3Backend::find(root)? {
            Some(backend) => Ok(LiveConfig::from_backend(
                backend.estate()?,
                backend.store(),
                backend.at.clone(),
            )),
            None => LiveConfig::load(root),
        },
        other => other,
    }
}

fn read_block(
    ctx: &Ctx,
    body: &hcl::edit::structure::Body,
    span: Option<std::ops::Range<usize>>,
) -> Result<S3Backend, ConfigError> {
    let what = "backend \"s3\"";
    for setting in S3_SETTINGS_RUN_SETS {
        let found = body
            .get_attribute(setting)
            .and_then(|a| a.span())
            .or_else(|| body.get_blocks(setting).next().and_then(|b| b.span()));
        if found.is_some() || body.get_blocks(setting).next().is_some() {
            return Err(ctx.invalid(found, refusal(setting)));
        }
    }
    let required = |name: &str| -> Result<String, ConfigError> {
        match ctx.string(body, name, what)? {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(ctx.invalid(
                span.clone(),
                format!(
                    "backend \"s3\" has no `{name}`; `choudoufu-live run` reads it from the block (a partial configuration given to init is not read yet): add {name} = \"...\""
                ),
            )),
        }
    };
    let path_style = match ctx.boolean(body, "use_path_style", what)? {
        Some(b) => Some(b),
        None => ctx.boolean(body, "force_path_style", what)?,
    };
    Ok(S3Backend {
        bucket: required("bucket")?,
        key: required("key")?,
        workspace_key_prefix: ctx
            .string(body, "workspace_key_prefix", what)?
            .unwrap_or_else(|| DEFAULT_WORKSPACE_PREFIX.to_string()),
        region: ctx.string(body, "region", what)?,
        use_path_style: path_style,
        kms_key_id: ctx.string(body, "kms_key_id", what)?,
        profile: ctx.string(body, "profile", what)?,
        role_arn: role_arn(ctx, body)?,
        at: at(ctx.file, ctx.text, span),
    })
}

/// The settings of `assume_role` `run` reads; any other is refused by name.
const ASSUME_ROLE_READ: [&str; 2] = ["role_arn", "session_name"];

/// `assume_role`'s `role_arn`: as terraform 1.6+ writes it (`assume_role = { role_arn = "..." }`), or as a block.
fn role_arn(ctx: &Ctx, body: &hcl::edit::structure::Body) -> Result<Option<String>, ConfigError> {
    let what = "backend \"s3\" assume_role";
    if let Some(block) = body.get_blocks("assume_role").next() {
        ctx.only(&block.body, &ASSUME_ROLE_READ, what)?;
        return match ctx.string(&block.body, "role_arn", what)? {
            Some(arn) if !arn.is_empty() => Ok(Some(arn)),
            _ => Err(ctx.invalid(block.span(), format!("{what} has no `role_arn`"))),
        };
    }
    let Some(attr) = body.get_attribute("assume_role") else {
        return Ok(None);
    };
    let hcl::edit::expr::Expression::Object(object) = &attr.value else {
        return Err(ctx.invalid(
            attr.span(),
            format!("{what} must be an object: assume_role = {{ role_arn = \"...\" }}"),
        ));
    };
    let mut arn = None;
    for (key, value) in object.iter() {
        let name = match key {
            hcl::edit::expr::ObjectKey::Ident(i) => i.as_str().to_string(),
            hcl::edit::expr::ObjectKey::Expression(hcl::edit::expr::Expression::String(s)) => {
                s.value().to_string()
            }
            hcl::edit::expr::ObjectKey::Expression(_) => String::new(),
        };
        if !ASSUME_ROLE_READ.contains(&name.as_str()) {
            return Err(ctx.invalid(
                attr.span(),
                format!(
                    "{what} sets `{name}`; `choudoufu-live run` reads only {}: remove it, or give the role through the standard AWS environment",
                    ASSUME_ROLE_READ.join(" and ")
                ),
            ));
        }
        if name == "role_arn" {
            match value.expr() {
                hcl::edit::expr::Expression::String(s) if !s.value().is_empty() => {
                    arn = Some(s.value().to_string())
                }
                _ => {
                    return Err(ctx.invalid(
                        attr.span(),
                        format!("{what} `role_arn` must be a plain string literal"),
                    ));
                }
            }
        }
    }
    match arn {
        Some(arn) => Ok(Some(arn)),
        None => Err(ctx.invalid(attr.span(), format!("{what} has no `role_arn`"))),
    }
}

fn refusal(setting: &str) -> String {
    format!(
        "backend \"s3\" sets `{setting}`; remove it: `choudoufu-live run` points terraform at its own per-run door with the run's own credentials (a `profile` and `assume_role` stay in the block; give the record store's endpoint through the standard AWS environment: AWS_ENDPOINT_URL_S3; a dynamodb_table lock is not needed, the claims do that work)"
    )
}

/// Refuse the settings `run` gives terraform when `init -backend-config` stored them for an s3 backend.
pub fn check_stored_s3(args: &[String]) -> Result<(), ConfigError> {
    let Some(stored) = read_stored_backend(&stored_backend_file(args))? else {
        return Ok(());
    };
    if stored.kind != "s3" {
        return Ok(());
    }
    match S3_SETTINGS_RUN_SETS
        .iter()
        .find(|s| stored.set.iter().any(|set| set == *s))
    {
        Some(setting) => Err(ConfigError::Invalid {
            at: stored.file.display().to_string(),
            message: refusal(setting),
        }),
        None => Ok(()),
    }
}

/// Whether terraform's working folder for `args` still names backend `http`: then an s3 block
/// is where the root is moving to (`init -migrate-state`), and `run` serves the records as the
/// old http backend, not through the S3 door.
pub fn stored_is_http(args: &[String]) -> bool {
    matches!(
        read_stored_backend(&stored_backend_file(args)),
        Ok(Some(stored)) if stored.kind == "http"
    )
}

/// The workspace terraform will use for `args`: `TF_WORKSPACE`, else the one `workspace select` stored, else `default`.
pub fn selected_workspace(args: &[String]) -> String {
    if let Ok(ws) = std::env::var("TF_WORKSPACE")
        && !ws.is_empty()
    {
        return ws;
    }
    let file = stored_backend_file(args).with_file_name("environment");
    std::fs::read_to_string(file)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(backend: &str) -> Result<Option<S3Backend>, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("main.tf"),
            format!("terraform {{\n  backend \"s3\" {{\n{backend}\n  }}\n}}\n"),
        )
        .unwrap();
        S3Backend::find(dir.path())
    }

    #[test]
    fn the_block_is_read_and_what_run_sets_is_refused() {
        let b = load("bucket = \"b\"\nkey = \"prod/net/terraform.tfstate\"\nregion = \"eu-west-1\"\nuse_lockfile = true")
            .unwrap()
            .unwrap();
        assert_eq!(b.bucket, "b");
        assert_eq!(b.workspace_key_prefix, "env:");
        assert_eq!(b.estate().unwrap().as_str(), "prod-net-terraform.tfstate");
        for refused in [
            "endpoints = { s3 = \"http://x\" }",
            "endpoints {\n s3 = \"http://x\"\n}",
            "dynamodb_table = \"t\"",
            "assume_role = { role_arn = \"r\", external_id = \"x\" }",
        ] {
            let e = load(&format!("bucket = \"b\"\nkey = \"k\"\n{refused}")).unwrap_err();
            assert!(e.to_string().contains("remove it"), "{refused}: {e}");
        }
        // A profile and a role are the record store's, and terraform's own through the door.
        for (set, profile) in [
            (
                "profile = \"p\"\nassume_role = { role_arn = \"arn:r\" }",
                Some("p"),
            ),
            (
                "assume_role {\n role_arn = \"arn:r\"\n session_name = \"s\"\n}",
                None,
            ),
        ] {
            let b = load(&format!("bucket = \"b\"\nkey = \"k\"\n{set}"))
                .unwrap()
                .unwrap();
            assert_eq!(b.profile.as_deref(), profile);
            assert_eq!(b.role_arn.as_deref(), Some("arn:r"));
        }
        let e = load("key = \"k\"").unwrap_err();
        assert!(e.to_string().contains("no `bucket`"), "{e}");
    }
}
