//! The root's HCL files: reading and parsing them, placing an item at `file:line`, and reading plain attributes.

use std::path::{Path, PathBuf};

use hcl::edit::Span;
use hcl::edit::expr::Expression;
use hcl::edit::parser;
use hcl::edit::structure::Body;

use super::error::ConfigError;

/// The line of `offset` in `text`, from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |t| t.matches('\n').count() + 1)
}

/// `file:line` of `span` in `text` (the file alone when there is no span).
pub(super) fn at(file: &str, text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => format!("{file}:{}", line_of(text, r.start)),
        None => file.to_string(),
    }
}

/// Parse `text`, read from `path`, as an HCL body.
pub(super) fn parse_file(path: &Path, text: &str) -> Result<Body, ConfigError> {
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

/// The text of the file at `path`.
pub(super) fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The `.tf` files of a root, in name order, with their text.
pub(super) fn tf_files(root: &Path) -> Result<Vec<(PathBuf, String)>, ConfigError> {
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

/// One file being interpreted: its name and text, to place what is wrong in it.
pub(super) struct Ctx<'a> {
    /// The file's name as shown.
    pub(super) file: &'a str,
    /// Its text.
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    /// An invalid item at `span`, saying `message`.
    pub(super) fn invalid(
        &self,
        span: Option<std::ops::Range<usize>>,
        message: String,
    ) -> ConfigError {
        ConfigError::Invalid {
            at: at(self.file, self.text, span),
            message,
        }
    }

    /// The attribute `name` of `body` as a plain string, if set.
    pub(super) fn string(
        &self,
        body: &Body,
        name: &str,
        what: &str,
    ) -> Result<Option<String>, ConfigError> {
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

    /// The attribute `name` of `body` as a boolean, if set.
    pub(super) fn boolean(
        &self,
        body: &Body,
        name: &str,
        what: &str,
    ) -> Result<Option<bool>, ConfigError> {
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

    /// Refuse any attribute of `body` not in `allowed`.
    pub(super) fn only(
        &self,
        body: &Body,
        allowed: &[&str],
        what: &str,
    ) -> Result<(), ConfigError> {
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
