//! The root's copy of the last image it saw: kept in the read cache's private folder, so a
//! first read of a run need not fetch the stored image.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::estate_image::Image;
use super::held::Held;
use super::text::line;
use crate::engine::digest::sha256_hex;
use crate::engine::layout::Layout;
use crate::engine::private_dir;
use crate::engine::read_cache::ReadCache;
use crate::store::Version;
use crate::store::private_file::{self, Durability};

/// Where a root keeps its copy of the last image it saw of `layout`'s estate.
fn local_path(cache: &ReadCache, layout: &Layout) -> PathBuf {
    cache.dir().join(format!(
        "image-{}",
        &sha256_hex(layout.estate().as_str().as_bytes())[..32]
    ))
}

#[derive(Serialize, Deserialize)]
struct LocalHead {
    /// The stored version of the image that follows.
    stored: Option<Version>,
    /// No image follows: the last look found none stored.
    #[serde(default)]
    absent: bool,
}

/// Whether the root's copy may hold an image, by its size alone (a copy that says only that
/// none is stored is its head line, under a kilobyte).
pub fn local_may_hold_image(cache: &ReadCache, layout: &Layout) -> bool {
    std::fs::metadata(local_path(cache, layout)).is_ok_and(|m| m.len() > 1024)
}

/// What the root's copy says of the estate's image (a copy that cannot be read: a warning, and unknown).
pub fn load_local(cache: &ReadCache, layout: &Layout) -> Held {
    let path = local_path(cache, layout);
    let ignore = |why: &dyn std::fmt::Display| {
        tracing::warn!(path = %path.display(), error = %why, "ignoring the local copy of the estate image");
        Held::Unknown
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Held::Unknown,
        Err(e) => return ignore(&e),
    };
    let Some((head, at)) = line(&data, 0) else {
        return ignore(&"no header");
    };
    let head: LocalHead = match serde_json::from_slice(head) {
        Ok(h) => h,
        Err(e) => return ignore(&e),
    };
    if head.absent {
        return Held::Absent;
    }
    match Image::decode(layout, data[at..].to_vec()) {
        Ok(image) => Held::Image(Arc::new(image.stored_as(head.stored))),
        Err(e) => ignore(&e),
    }
}

/// Keep what is known of the image as the root's copy (private files; a failure only costs a fetch).
pub fn save_local(cache: &ReadCache, layout: &Layout, held: &Held) {
    let (head, image) = match held {
        Held::Unknown => return,
        Held::Absent => (
            LocalHead {
                stored: None,
                absent: true,
            },
            None,
        ),
        Held::Image(i) => (
            LocalHead {
                stored: i.stored().cloned(),
                absent: false,
            },
            Some(i),
        ),
    };
    let path = local_path(cache, layout);
    let dir = cache.dir();
    let written = private_dir::create(dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            private_file::write_with(&path, Durability::Synced, |f| {
                serde_json::to_writer(&mut *f, &head)?;
                f.write_all(b"\n")?;
                if let Some(image) = image {
                    f.write_all(image.bytes())?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())
        });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), error = %e, "could not keep a local copy of the estate image");
    }
}
