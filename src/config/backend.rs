//! The root's backend as `run` needs it: `backend "http" {}` in the `.tf` files, and nothing
//! stored or given to `init` that would make terraform talk to another address than `run`'s own.

use std::path::Path;

use hcl::edit::structure::BlockLabel;
use hcl::edit::{Span, parser};

use super::error::ConfigError;
use super::files::{Ctx, at, parse_file, tf_files};
use super::run_sets::BACKEND_SETTINGS_RUN_SETS_LIST;
use super::stored::{read_stored_backend, stored_backend_file, working_dir};
use crate::cut::{Mechanism, cut};

/// Check that the root declares `backend "http" {}` with no addresses, as `run` needs.
pub fn check_http_backend(root: &Path) -> Result<(), ConfigError> {
    let mut found = false;
    for (path, text) in tf_files(root)? {
        let body = parse_file(&path, &text)?;
        let file = path.display().to_string();
        let ctx = Ctx {
            file: &file,
            text: &text,
        };
        for tf in body.get_blocks("terraform") {
            for backend in tf.body.get_blocks("backend") {
                let kind = match backend.labels.first() {
                    Some(BlockLabel::String(s)) => s.value().to_string(),
                    Some(BlockLabel::Ident(i)) => i.as_str().to_string(),
                    None => String::new(),
                };
                if kind != "http" {
                    return Err(ConfigError::NotHttpBackend {
                        at: at(&file, &text, backend.span()),
                        kind,
                    });
                }
                for attr in BACKEND_SETTINGS_RUN_SETS_LIST {
                    if let Some(a) = backend.body.get_attribute(attr) {
                        return Err(ctx.invalid(
                            a.span(),
                            format!(
                                "backend \"http\" sets `{attr}`; remove it: `choudoufu-live run` gives terraform the address and credentials of its own per-run server"
                            ),
                        ));
                    }
                }
                found = true;
            }
            if let Some(live) = tf.body.get_blocks("live").next() {
                return Err(ctx.invalid(
                    live.span(),
                    "a live block inside terraform {} is choudoufu's syntax; stock terraform and tofu reject it (\"Unsupported block type\"): move it to the top level of live.hcl".into(),
                ));
            }
        }
    }
    if found {
        Ok(())
    } else {
        Err(ConfigError::NoHttpBackend {
            root: root.to_path_buf(),
        })
    }
}

/// Refuse, before terraform starts, backend settings stored or given that would bypass `run`'s own server.
///
/// `terraform init -backend-config=address=...` stores the address in
/// `.terraform/terraform.tfstate` (or `$TF_DATA_DIR/terraform.tfstate`), and a stored value
/// wins over `TF_HTTP_ADDRESS`: terraform would silently talk to that address instead. `init`
/// itself rewrites that file, so for `init` the `-backend-config` arguments are checked instead.
/// `args` are terraform's arguments (after the program name).
pub fn check_stored_backend(args: &[String]) -> Result<(), ConfigError> {
    if cut(Mechanism::StoredBackend) {
        return Ok(());
    }
    let subcommand = args
        .iter()
        .map(String::as_str)
        .find(|a| !a.starts_with('-'));
    if subcommand == Some("init") {
        return check_backend_config_args(args, &working_dir(args));
    }
    let stored = match read_stored_backend(&stored_backend_file(args)) {
        Ok(Some(stored)) => stored,
        // Not initialised yet, or a file terraform itself will report as broken.
        Ok(None) | Err(ConfigError::Parse { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    if stored.kind != "http" {
        return Ok(());
    }
    match BACKEND_SETTINGS_RUN_SETS_LIST
        .iter()
        .find(|s| stored.set.iter().any(|set| set == *s))
    {
        Some(setting) => Err(ConfigError::StoredBackend {
            file: stored.file,
            setting: setting.to_string(),
        }),
        None => Ok(()),
    }
}

/// Refuse `init -backend-config` arguments (`KEY=VALUE`, or a file of settings) that set what `run` sets.
fn check_backend_config_args(args: &[String], dir: &Path) -> Result<(), ConfigError> {
    let mut values = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("-backend-config=") {
            values.push(v.to_string());
        } else if a == "-backend-config"
            && let Some(v) = it.next()
        {
            values.push(v.clone());
        }
    }
    for value in values {
        let refuse = |setting: &str| ConfigError::BackendConfigArg {
            arg: format!("-backend-config={value}"),
            setting: setting.to_string(),
        };
        if let Some((key, _)) = value.split_once('=') {
            let key = key.trim();
            if BACKEND_SETTINGS_RUN_SETS_LIST.contains(&key) {
                return Err(refuse(key));
            }
            continue;
        }
        // A file of settings, as terraform reads it (relative to terraform's folder).
        let path = dir.join(&value);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(body) = parser::parse_body(&text) else {
            continue;
        };
        for setting in BACKEND_SETTINGS_RUN_SETS_LIST {
            if body.get_attribute(setting).is_some() {
                return Err(refuse(setting));
            }
        }
    }
    Ok(())
}
