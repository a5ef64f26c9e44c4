//! Multipart uploads of a state document (terraform's s3 backend sends a large state in
//! parts), kept in memory until they are completed as one write, or aborted.

use std::collections::{BTreeMap, HashMap};

use bytes::{Bytes, BytesMut};
use s3s::{S3Error, S3ErrorCode, S3Result};
use tokio::sync::Mutex;

/// The uploads under way at one door, by upload id.
#[derive(Debug, Default)]
pub struct Uploads {
    open: Mutex<HashMap<String, Upload>>,
}

#[derive(Debug)]
struct Upload {
    key: String,
    parts: BTreeMap<i32, Bytes>,
}

fn no_such_upload(id: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NoSuchUpload,
        format!("no upload {id:?} is under way at this run's door; nothing was written"),
    )
}

impl Uploads {
    /// Start an upload to `key`; its id.
    pub async fn start(&self, key: &str) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        self.open.lock().await.insert(
            id.clone(),
            Upload {
                key: key.to_string(),
                parts: BTreeMap::new(),
            },
        );
        id
    }

    /// Keep part `number` of upload `id`, refused once the parts come to more than `limit` bytes.
    pub async fn part(
        &self,
        id: &str,
        key: &str,
        number: i32,
        bytes: Bytes,
        limit: usize,
    ) -> S3Result<()> {
        let mut open = self.open.lock().await;
        let upload = open
            .get_mut(id)
            .filter(|u| u.key == key)
            .ok_or_else(|| no_such_upload(id))?;
        upload.parts.insert(number, bytes);
        let total: usize = upload.parts.values().map(Bytes::len).sum();
        if total > limit {
            open.remove(id);
            return Err(S3Error::with_message(
                S3ErrorCode::EntityTooLarge,
                format!(
                    "the state document is over this door's {limit}-byte limit; nothing was written"
                ),
            ));
        }
        Ok(())
    }

    /// End upload `id`: its `parts`, in the order given, as one body.
    pub async fn complete(&self, id: &str, key: &str, parts: &[i32]) -> S3Result<Bytes> {
        let upload = {
            let mut open = self.open.lock().await;
            match open.get(id) {
                Some(u) if u.key == key => open.remove(id),
                _ => None,
            }
        }
        .ok_or_else(|| no_such_upload(id))?;
        let mut body = BytesMut::new();
        for number in parts {
            let part = upload.parts.get(number).ok_or_else(|| {
                S3Error::with_message(
                    S3ErrorCode::InvalidPart,
                    format!("part {number} of upload {id:?} never arrived; nothing was written"),
                )
            })?;
            body.extend_from_slice(part);
        }
        Ok(body.freeze())
    }

    /// Drop upload `id` and its parts.
    pub async fn abort(&self, id: &str) {
        self.open.lock().await.remove(id);
    }
}
