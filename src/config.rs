//! The root's `live` block: in `terraform {}` of a `.tf` file (choudoufu), or at the top of `live.hcl`;
//! and the root's backend block as `run` needs it ([`migration`]: leaving for another backend).

pub mod backend;
pub mod migration;

use backend::BACKEND_SETTINGS_RUN_SETS;
pub use backend::{check_http_backend, check_stored_backend};

use std::path::{Path, PathBuf};

use hcl::edit::expr::Expression;
use hcl::edit::structure::{Block, BlockLabel, Body};
use hcl::edit::{Span, parser};

use thiserror::Error;

use crate::engine::layout::EstateName;
use crate::store::settings::{SettingError, SettingsSource, StoreKind};
use crate::store::{StoreSettings, local::LocalSettings};

/// The file stock terraform and tofu do not read, where the live block may stand at the top level.
pub const LIVE_FILE: &str = "live.hcl";

/// The root's `live` block is missing or invalid.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// No live block anywhere in the root.
    #[error(
        "no live block in {root}: add a file live.hcl to the root with\n\n  live {{\n    estate = \"my-estate\"\n    record_store \"local\" {{\n      path = \".live-records\"\n    }}\n  }}\n\n(or, for choudoufu, the same block inside terraform {{}})"
    )]
    NoLiveBlock {
        /// The root folder.
        root: PathBuf,
    },
    /// Two live blocks: in two files, or twice in one.
    #[error("two live blocks: {first} and {second}; keep exactly one")]
    TwoLiveBlocks {
        /// `file:line` of the first.
        first: String,
        /// `file:line` of the second.
        second: String,
    },
    /// A file that is not valid HCL.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A live block whose content is wrong.
    #[error("{at}: {message}")]
    Invalid {
        /// `file:line` of the offending item.
        at: String,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// The root's backend block is of another type than `http`.
    #[error(
        "{at}: backend {kind:?}: `choudoufu-live run` serves the state itself; replace it with backend \"http\" {{}}"
    )]
    NotHttpBackend {
        /// `file:line` of the block.
        at: String,
        /// Its type, e.g. `local`.
        kind: String,
    },
    /// The root's backend block left http, and terraform's working folder still uses http:
    /// a migration out of the records, which only `init -migrate-state` makes.
    #[error(
        "{at}: backend {kind:?}: `choudoufu-live run` serves the state over backend \"http\", and this root's {stored} still names backend \"http\". To move the estate's state to backend {kind:?}, run `choudoufu-live run -- terraform init -migrate-state` (the records stay in the store); to keep using the records, put back backend \"http\" {{}}"
    )]
    LeaveWithInit {
        /// `file:line` of the new backend block (the root's folder when there is none).
        at: String,
        /// The new backend's type (`local` when the block was removed).
        kind: String,
        /// terraform's stored backend file, e.g. `.terraform/terraform.tfstate`.
        stored: String,
    },
    /// The root has no `backend "http" {}` for `run` to point at its server.
    #[error(
        "no backend \"http\" block in {root}: `choudoufu-live run` serves the state over terraform's HTTP backend; add to a .tf file in the root:\n\n  terraform {{\n    backend \"http\" {{}}\n  }}\n\n(leave address, lock_address and unlock_address out: run sets the address for each run)"
    )]
    NoHttpBackend {
        /// The root folder.
        root: PathBuf,
    },
    /// `.terraform/terraform.tfstate` stores a backend setting that wins over the ones `run` gives terraform.
    #[error(
        "{file} stores backend \"http\" `{setting}` (set by `terraform init -backend-config=...`); terraform would use it instead of this run's own state server and bypass choudoufu-live, so terraform was not started and nothing was read or written. Clear it with `choudoufu-live run -- terraform init -reconfigure`, without -backend-config for {BACKEND_SETTINGS_RUN_SETS}"
    )]
    StoredBackend {
        /// The backend file.
        file: PathBuf,
        /// The stored setting.
        setting: String,
    },
    /// `init -backend-config` sets what `run` gives terraform itself.
    #[error(
        "{arg}: -backend-config sets `{setting}`, which `choudoufu-live run` gives terraform itself (this run's own state server and its credentials); remove it. Nothing was started."
    )]
    BackendConfigArg {
        /// The argument (or the file it names).
        arg: String,
        /// The setting it sets.
        setting: String,
    },
    /// A file that could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A root's live settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveConfig {
    /// The estate.
    pub estate: EstateName,
    /// The record store.
    pub store: StoreSettings,
    /// `file:line` of the block.
    pub source: String,
    /// Where to list live objects by their markers (`markers "aws" { region = ... }`), if anywhere.
    pub markers: Option<MarkerListing>,
}

/// The provider settings `run` lists live objects with, to warn about marked objects no record names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerListing {
    /// The region.
    pub region: String,
    /// A custom endpoint (S3-compatible or test peers), if any.
    pub endpoint: Option<String>,
    /// A named profile for the credentials chain, if any.
    pub profile: Option<String>,
}

impl MarkerListing {
    /// The AWS provider configuration the lister reads.
    pub fn provider_json(&self) -> serde_json::Value {
        serde_json::json!({"region": self.region, "endpoint_url": self.endpoint, "profile": self.profile})
    }
}

struct Located<'a> {
    block: &'a Block,
    file: String,
    text: &'a str,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |t| t.matches('\n').count() + 1)
}

fn at(file: &str, text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => format!("{file}:{}", line_of(text, r.start)),
        None => file.to_string(),
    }
}

fn parse_file(path: &Path, text: &str) -> Result<Body, ConfigError> {
    parser::parse_body(text).map_err(|e| ConfigError::Parse {
        file: path.display().to_string(),
        message: format!(
            "line {}, column {}: {}",
            e.location().line(),
            e.location().column(),
            e.message()
        ),
    })
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl LiveConfig {
    /// Find and read the live block of the root at `root`.
    pub fn load(root: &Path) -> Result<LiveConfig, ConfigError> {
        let live_file = root.join(LIVE_FILE);
        let mut texts: Vec<(PathBuf, String, bool)> = tf_files(root)?
            .into_iter()
            .map(|(p, t)| (p, t, false))
            .collect();
        if live_file.is_file() {
            let text = read(&live_file)?;
            texts.push((live_file, text, true));
        }
        let mut bodies = Vec::new();
        for (path, text, top) in &texts {
            bodies.push((path, text.as_str(), parse_file(path, text)?, *top));
        }
        let mut found: Vec<Located> = Vec::new();
        for (path, text, body, top) in &bodies {
            let file = path.display().to_string();
            if *top {
                for block in body.get_blocks("live") {
                    found.push(Located {
                        block,
                        file: file.clone(),
                        text,
                    });
                }
            } else {
                for tf in body.get_blocks("terraform") {
                    for block in tf.body.get_blocks("live") {
                        found.push(Located {
                            block,
                            file: file.clone(),
                            text,
                        });
                    }
                }
            }
        }
        match found.as_slice() {
            [] => Err(ConfigError::NoLiveBlock {
                root: root.to_path_buf(),
            }),
            [one] => interpret(one, root),
            [a, b, ..] => Err(ConfigError::TwoLiveBlocks {
                first: at(&a.file, a.text, a.block.span()),
                second: at(&b.file, b.text, b.block.span()),
            }),
        }
    }

    /// The local store's folder, made absolute against `root`.
    pub fn local_path(&self, root: &Path) -> Option<PathBuf> {
        match &self.store {
            StoreSettings::Local(local) => Some(local.path_from(root)),
            _ => None,
        }
    }
}

/// The `.tf` files of a root, in name order, with their text.
fn tf_files(root: &Path) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(|source| ConfigError::Read {
            path: root.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tf") && p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| read(&p).map(|t| (p, t)))
        .collect()
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn invalid(&self, span: Option<std::ops::Range<usize>>, message: String) -> ConfigError {
        ConfigError::Invalid {
            at: at(self.file, self.text, span),
            message,
        }
    }

    fn string(&self, body: &Body, name: &str, what: &str) -> Result<Option<String>, ConfigError> {
        let Some(attr) = body.get_attribute(name) else {
            return Ok(None);
        };
        match &attr.value {
            Expression::String(s) => Ok(Some(s.value().to_string())),
            _ => Err(self.invalid(
                attr.span(),
                format!("{what} `{name}` must be a plain string literal"),
            )),
        }
    }

    fn boolean(&self, body: &Body, name: &str, what: &str) -> Result<Option<bool>, ConfigError> {
        let Some(attr) = body.get_attribute(name) else {
            return Ok(None);
        };
        match &attr.value {
            Expression::Bool(b) => Ok(Some(*b.value())),
            _ => Err(self.invalid(
                attr.span(),
                format!("{what} `{name}` must be true or false"),
            )),
        }
    }

    fn only(&self, body: &Body, allowed: &[&str], what: &str) -> Result<(), ConfigError> {
        for attr in body.attributes() {
            let key = attr.key.as_str();
            if !allowed.contains(&key) {
                return Err(self.invalid(
                    attr.span(),
                    format!(
                        "{what} has no setting `{key}`; it takes: {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn interpret(found: &Located, root: &Path) -> Result<LiveConfig, ConfigError> {
    let ctx = Ctx {
        file: &found.file,
        text: found.text,
    };
    let body = &found.block.body;
    let source = at(&found.file, found.text, found.block.span());
    ctx.only(body, &["estate"], "the live block")?;
    let estate = match ctx.string(body, "estate", "the live block's")? {
        Some(name) => EstateName::parse(&name)
            .map_err(|m| ctx.invalid(body.get_attribute("estate").and_then(|a| a.span()), m))?,
        None => {
            return Err(ctx.invalid(
                found.block.span(),
                "the live block has no `estate`; add e.g. estate = \"prod-eu\"".into(),
            ));
        }
    };
    for block in body.blocks() {
        if !matches!(block.ident.as_str(), "record_store" | "markers") {
            return Err(ctx.invalid(
                block.span(),
                format!(
                    "unknown block `{}` in the live block; it takes one record_store block and at most one markers block",
                    block.ident.as_str()
                ),
            ));
        }
    }
    let markers = match body.get_blocks("markers").collect::<Vec<_>>().as_slice() {
        [] => None,
        [one] => Some(marker_listing(&ctx, one)?),
        [_, second, ..] => {
            return Err(ctx.invalid(
                second.span(),
                "a second markers block; the live block takes at most one".into(),
            ));
        }
    };
    let stores: Vec<&Block> = body.get_blocks("record_store").collect();
    let store = match stores.as_slice() {
        [] => StoreSettings::Local(LocalSettings::default()),
        [one] => store_settings(&ctx, one)?,
        [_, second, ..] => {
            return Err(ctx.invalid(
                second.span(),
                "a second record_store block; the live block takes exactly one".into(),
            ));
        }
    };
    let _ = root;
    Ok(LiveConfig {
        estate,
        store,
        source,
        markers,
    })
}

fn marker_listing(ctx: &Ctx, block: &Block) -> Result<MarkerListing, ConfigError> {
    let family = match block.labels.as_slice() {
        [BlockLabel::String(s)] => s.value().to_string(),
        [BlockLabel::Ident(i)] => i.as_str().to_string(),
        _ => String::new(),
    };
    if family != "aws" {
        return Err(ctx.invalid(
            block.span(),
            format!("markers {family:?}: only the \"aws\" family has a lister; write markers \"aws\" {{ region = \"eu-west-1\" }}"),
        ));
    }
    let what = "markers \"aws\"";
    ctx.only(&block.body, &["region", "endpoint", "profile"], what)?;
    let region = ctx
        .string(&block.body, "region", what)?
        .filter(|r| !r.is_empty());
    let Some(region) = region else {
        return Err(ctx.invalid(
            block.span(),
            "markers \"aws\" has no `region`; add region = \"eu-west-1\"".into(),
        ));
    };
    Ok(MarkerListing {
        region,
        endpoint: ctx.string(&block.body, "endpoint", what)?,
        profile: ctx.string(&block.body, "profile", what)?,
    })
}

/// A `record_store` block's attributes as a settings source.
struct HclSource<'a> {
    ctx: &'a Ctx<'a>,
    body: &'a Body,
    what: String,
}

impl SettingsSource for HclSource<'_> {
    fn string(&self, name: &str) -> Result<Option<String>, SettingError> {
        self.ctx
            .string(self.body, name, &self.what)
            .map_err(|e| SettingError::setting(name, message_of(e)))
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError> {
        self.ctx
            .boolean(self.body, name, &self.what)
            .map_err(|e| SettingError::setting(name, message_of(e)))
    }

    fn names(&self) -> Vec<String> {
        self.body
            .attributes()
            .map(|a| a.key.as_str().to_string())
            .collect()
    }
}

/// The message of a config error, without its place (the caller places it again).
fn message_of(e: ConfigError) -> String {
    match e {
        ConfigError::Invalid { message, .. } => message,
        other => other.to_string(),
    }
}

fn store_settings(ctx: &Ctx, block: &Block) -> Result<StoreSettings, ConfigError> {
    let kind = match block.labels.as_slice() {
        [BlockLabel::String(s)] => s.value().to_string(),
        [BlockLabel::Ident(i)] => i.as_str().to_string(),
        _ => {
            return Err(ctx.invalid(
                block.span(),
                "record_store takes one label, the kind: record_store \"local\", \"s3\", \"azurerm\" or \"gcs\" { ... }"
                    .into(),
            ));
        }
    };
    let body = &block.body;
    if let Some(inner) = body.blocks().next() {
        return Err(ctx.invalid(
            inner.span(),
            format!("record_store takes no block `{}`", inner.ident.as_str()),
        ));
    }
    let placed = |e: SettingError| {
        let span = e
            .setting
            .as_deref()
            .and_then(|name| body.get_attribute(name))
            .and_then(|a| a.span())
            .or_else(|| block.span());
        ctx.invalid(span, e.message)
    };
    let kind = StoreKind::parse(&kind).map_err(placed)?;
    let source = HclSource {
        ctx,
        body,
        what: format!("record_store {:?}", kind.as_str()),
    };
    StoreSettings::from_source(kind, &source).map_err(placed)
}
