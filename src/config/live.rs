//! The root's `live` block: in `terraform {}` of a `.tf` file (choudoufu), or at the top of `live.hcl`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hcl::edit::Span;
use hcl::edit::structure::{Block, BlockLabel, Body};

use super::error::ConfigError;
use super::files::{Ctx, at, parse_file, read, tf_files};
use crate::engine::cone::{DEFAULT_MAX_AGE, RefreshMode};
use crate::engine::layout::EstateName;
use crate::store::settings::{SettingError, SettingsSource, StoreKind};
use crate::store::{StoreSettings, local::LocalSettings};

/// The file stock terraform and tofu do not read, where the live block may stand at the top level.
pub const LIVE_FILE: &str = "live.hcl";

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
    /// `provider_door`: whether `run` puts its provider door between terraform and the providers (default true).
    pub provider_door: bool,
    /// `markers`: whether the provider door puts the live markers into each create and binds what they find (default true).
    pub live_markers: bool,
    /// `refresh`: how a plan through `run` refreshes, `"full"` (the default) or `"cone"`.
    pub refresh: RefreshMode,
    /// `refresh_max_age`: how long a record may go unrefreshed before a cone plan refreshes it anyway (default 24h).
    pub refresh_max_age: Duration,
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

    /// The settings of a root with no live block whose backend names its store: `estate` in
    /// `store`, every other setting at its default; `source` is the backend block's `file:line`.
    pub fn from_backend(estate: EstateName, store: StoreSettings, source: String) -> LiveConfig {
        LiveConfig {
            estate,
            store,
            source,
            markers: None,
            provider_door: true,
            live_markers: true,
            refresh: RefreshMode::Full,
            refresh_max_age: DEFAULT_MAX_AGE,
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

fn interpret(found: &Located, root: &Path) -> Result<LiveConfig, ConfigError> {
    let ctx = Ctx {
        file: &found.file,
        text: found.text,
    };
    let body = &found.block.body;
    let source = at(&found.file, found.text, found.block.span());
    ctx.only(
        body,
        &[
            "estate",
            "provider_door",
            "markers",
            "refresh",
            "refresh_max_age",
        ],
        "the live block",
    )?;
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
    let provider_door = ctx
        .boolean(body, "provider_door", "the live block's")?
        .unwrap_or(true);
    let live_markers = ctx
        .boolean(body, "markers", "the live block's")?
        .unwrap_or(true);
    let refresh = match ctx.string(body, "refresh", "the live block's")? {
        Some(mode) => RefreshMode::parse(&mode).map_err(|e| {
            ctx.invalid(
                body.get_attribute("refresh").and_then(|a| a.span()),
                e.to_string(),
            )
        })?,
        None => RefreshMode::Full,
    };
    let refresh_max_age = match ctx.string(body, "refresh_max_age", "the live block's")? {
        Some(age) => humantime::parse_duration(&age).map_err(|e| {
            ctx.invalid(
                body.get_attribute("refresh_max_age").and_then(|a| a.span()),
                format!("refresh_max_age {age:?}: {e}; give a duration such as \"24h\" or \"30m\""),
            )
        })?,
        None => DEFAULT_MAX_AGE,
    };
    Ok(LiveConfig {
        estate,
        store,
        source,
        markers,
        provider_door,
        live_markers,
        refresh,
        refresh_max_age,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn load(block: &str) -> Result<LiveConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LIVE_FILE), block).unwrap();
        LiveConfig::load(dir.path())
    }

    #[test]
    fn refresh_and_its_maximum_age() {
        let c = load("live {\n  estate = \"e\"\n}\n").unwrap();
        assert_eq!(
            (c.refresh, c.refresh_max_age),
            (RefreshMode::Full, DEFAULT_MAX_AGE)
        );
        let c =
            load("live {\n  estate = \"e\"\n  refresh = \"cone\"\n  refresh_max_age = \"2h\"\n}\n")
                .unwrap();
        assert_eq!(
            (c.refresh, c.refresh_max_age),
            (RefreshMode::Cone, Duration::from_secs(7200))
        );
        let e = load("live {\n  estate = \"e\"\n  refresh = \"some\"\n}\n").unwrap_err();
        assert!(e.to_string().contains("\"some\" is not one of"), "{e}");
        let e = load("live {\n  estate = \"e\"\n  refresh_max_age = \"soon\"\n}\n").unwrap_err();
        assert!(e.to_string().contains("refresh_max_age \"soon\""), "{e}");
    }
}
