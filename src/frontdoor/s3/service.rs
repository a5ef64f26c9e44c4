//! The S3 calls of terraform's s3 backend, answered from the records: a workspace's state
//! object is its estate's assembled document, a write of it is a records write, and its lock
//! object is kept only in this door's memory (no lock: the claims do that work).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, CompleteMultipartUploadInput,
    CompleteMultipartUploadOutput, CreateMultipartUploadInput, CreateMultipartUploadOutput,
    DeleteObjectInput, DeleteObjectOutput, ETag, GetObjectInput, GetObjectOutput, HeadObjectInput,
    HeadObjectOutput, ListObjectsInput, ListObjectsOutput, ListObjectsV2Input, ListObjectsV2Output,
    Object as Listed, PutObjectInput, PutObjectOutput, Range, StreamingBlob, Timestamp,
    UploadPartInput, UploadPartOutput,
};
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::estates::Estates;
use super::keys::{DEFAULT_WORKSPACE, Object, StateKeys};
use super::upload::Uploads;
use crate::cut::{Mechanism, cut};
use crate::engine::session::EstateDeleted;
use crate::frontdoor::NO_LOCK;
use crate::frontdoor::http::{Backend, WriteRefusal};

/// One run's S3 door: the backend's keys, the estates behind them, the lock objects terraform
/// wrote through this door, and the multipart uploads under way.
#[derive(Debug)]
pub struct Door {
    keys: StateKeys,
    estates: Arc<Estates>,
    locks: Mutex<HashMap<String, Bytes>>,
    served: Mutex<HashMap<String, Bytes>>,
    uploads: Uploads,
}

impl Door {
    /// A door serving `estates` at the objects `keys` names.
    pub fn new(keys: StateKeys, estates: Arc<Estates>) -> Self {
        Door {
            keys,
            estates,
            locks: Mutex::new(HashMap::new()),
            served: Mutex::new(HashMap::new()),
            uploads: Uploads::default(),
        }
    }

    fn object(&self, bucket: &str, key: &str) -> S3Result<Object> {
        if bucket != self.keys.bucket {
            return Err(S3Error::with_message(
                S3ErrorCode::NoSuchBucket,
                format!(
                    "this run's door serves only the backend's bucket {:?}; nothing was read or written",
                    self.keys.bucket
                ),
            ));
        }
        Ok(self.keys.object(key))
    }

    async fn backend(&self, ws: &str) -> S3Result<Arc<Backend>> {
        self.estates
            .backend(ws)
            .await
            .map_err(|m| S3Error::with_message(S3ErrorCode::InvalidArgument, m))
    }

    /// A workspace's state document, read again from the records (`fresh`), or the one this
    /// door served last (the later parts of one ranged download); none when another workspace
    /// than the run's own has no state yet.
    async fn document(&self, ws: &str, fresh: bool) -> S3Result<Option<Bytes>> {
        if !fresh && let Some(doc) = self.served.lock().await.get(ws) {
            return Ok(Some(doc.clone()));
        }
        let backend = self.backend(ws).await?;
        let doc = backend
            .read_document()
            .await
            .map_err(|m| S3Error::with_message(S3ErrorCode::InternalError, m))?;
        // The run's own workspace is always served a document, as the http backend serves one
        // (a fresh estate's with its deterministic lineage): terraform then keeps the state it
        // read, and never reads again before its final write, which would move the session's
        // base under the records the provider door wrote during the apply.
        let snapshot = backend.session().snapshot().await;
        if !self.estates.is_main(ws) && snapshot.estate.is_none() && snapshot.records.is_empty() {
            self.served.lock().await.remove(ws);
            return Ok(None);
        }
        let doc = Bytes::from(doc);
        self.served.lock().await.insert(ws.to_string(), doc.clone());
        Ok(Some(doc))
    }

    async fn lock_object(&self, ws: &str) -> Option<Bytes> {
        self.locks.lock().await.get(ws).cloned()
    }

    /// The object at `key`, whole: a state document or a lock object.
    async fn read(&self, bucket: &str, key: &str, fresh: bool) -> S3Result<Bytes> {
        let found = match self.object(bucket, key)? {
            Object::State(ws) => self.document(&ws, fresh).await?,
            Object::Lock(ws) => self.lock_object(&ws).await,
            Object::Other => None,
        };
        found.ok_or_else(|| no_such_key(key))
    }

    /// Write `body` at `key`: a workspace's state as records, or its lock object in memory.
    async fn write(&self, bucket: &str, key: &str, body: Bytes) -> S3Result<ETag> {
        let tag = etag(&body);
        match self.object(bucket, key)? {
            Object::State(ws) => {
                let backend = self.backend(&ws).await?;
                tracing::debug!(workspace = %ws, bytes = body.len(), "a state write");
                backend.write_document(&body).await.map_err(|refused| {
                    let (code, status) = match refused.kind {
                        WriteRefusal::Conflict => (
                            S3ErrorCode::Custom("RecordConflict".into()),
                            hyper::StatusCode::CONFLICT,
                        ),
                        WriteRefusal::BadDocument => {
                            (S3ErrorCode::InvalidArgument, hyper::StatusCode::BAD_REQUEST)
                        }
                        WriteRefusal::Failed => (
                            S3ErrorCode::InternalError,
                            hyper::StatusCode::INTERNAL_SERVER_ERROR,
                        ),
                    };
                    let mut e = S3Error::with_message(code, refused.message);
                    e.set_status_code(status);
                    e
                })?;
                self.served.lock().await.remove(&ws);
            }
            Object::Lock(ws) => {
                tracing::info!(workspace = %ws, "{NO_LOCK}; the lock object stays in this run's door");
                if !cut(Mechanism::NoLock) {
                    self.locks.lock().await.insert(ws, body);
                }
            }
            Object::Other => {
                tracing::warn!(key, "a write outside the backend's state objects refused");
                return Err(not_served(key));
            }
        }
        Ok(tag)
    }

    async fn body(&self, blob: Option<StreamingBlob>, limit: usize) -> S3Result<Bytes> {
        let Some(mut blob) = blob else {
            return Ok(Bytes::new());
        };
        let mut bytes = Vec::new();
        while let Some(chunk) = blob.next().await {
            let chunk = chunk.map_err(|e| {
                S3Error::with_message(
                    S3ErrorCode::IncompleteBody,
                    format!("the object did not arrive whole ({e}); nothing was written"),
                )
            })?;
            if bytes.len() + chunk.len() > limit {
                return Err(too_large(limit));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(bytes))
    }

    fn limit(&self) -> usize {
        self.estates.main().max_body()
    }

    /// Every state object under `prefix`: `default`'s at the key, each other workspace's under the workspace prefix.
    async fn list(&self, bucket: &str, prefix: &str) -> S3Result<Vec<Listed>> {
        self.object(bucket, "")?;
        let names = self
            .estates
            .workspaces()
            .await
            .map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, e.to_string()))?;
        let now = Timestamp::from(std::time::SystemTime::now());
        Ok(names
            .iter()
            .filter(|ws| ws.as_str() != DEFAULT_WORKSPACE)
            .map(|ws| self.keys.state_key(ws))
            .filter(|key| key.starts_with(prefix))
            .map(|key| Listed {
                key: Some(key),
                size: Some(0),
                last_modified: Some(now.clone()),
                ..Default::default()
            })
            .collect())
    }
}

fn etag(bytes: &[u8]) -> ETag {
    ETag::Strong(hex::encode(&Sha256::digest(bytes)[..16]))
}

fn no_such_key(key: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::NoSuchKey, format!("no state at {key:?} yet"))
}

fn not_served(key: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::MethodNotAllowed,
        format!(
            "this run's door serves only the backend's state objects and their lock files, not {key:?}; nothing was written"
        ),
    )
}

fn too_large(limit: usize) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::EntityTooLarge,
        format!("the state document is over this door's {limit}-byte limit; nothing was written"),
    )
}

#[async_trait::async_trait]
impl S3 for Door {
    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let doc = self.read(&input.bucket, &input.key, true).await?;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(doc.len() as i64),
            e_tag: Some(etag(&doc)),
            last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let first = match input.range {
            Some(Range::Int { first, .. }) => first,
            _ => 0,
        };
        let doc = self.read(&input.bucket, &input.key, first == 0).await?;
        let total = doc.len() as u64;
        let (part, content_range) = match input.range {
            Some(range) => {
                let within = range
                    .check(total)
                    .map_err(|_| S3Error::new(S3ErrorCode::InvalidRange))?;
                let usize_of = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
                let part = doc.slice(usize_of(within.start)..usize_of(within.end));
                let header = format!(
                    "bytes {}-{}/{total}",
                    within.start,
                    within.end.saturating_sub(1)
                );
                (part, Some(header))
            }
            None => (doc.clone(), None),
        };
        Ok(S3Response::new(GetObjectOutput {
            content_length: Some(part.len() as i64),
            content_range,
            e_tag: Some(etag(&doc)),
            last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
            body: Some(StreamingBlob::wrap(futures::stream::once(async move {
                Ok::<_, std::io::Error>(part)
            }))),
            ..Default::default()
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let input = req.input;
        if let Some(len) = input.content_length
            && len > self.limit() as i64
        {
            return Err(too_large(self.limit()));
        }
        let body = self.body(input.body, self.limit()).await?;
        let tag = self.write(&input.bucket, &input.key, body).await?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(tag),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = req.input;
        match self.object(&input.bucket, &input.key)? {
            Object::Lock(ws) => {
                self.locks.lock().await.remove(&ws);
            }
            Object::State(ws) if ws == DEFAULT_WORKSPACE => {
                return Err(S3Error::with_message(
                    S3ErrorCode::MethodNotAllowed,
                    "the default workspace is the estate: choudoufu-live never deletes an estate whole through a state call; destroy its resources instead. Nothing was deleted.",
                ));
            }
            Object::State(ws) => {
                let backend = self.backend(&ws).await?;
                let deleted = backend.session().delete_estate().await.map_err(|e| {
                    S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
                })?;
                match deleted {
                    EstateDeleted::Deleted => {
                        self.served.lock().await.remove(&ws);
                    }
                    EstateDeleted::HoldsRecords(n) => {
                        return Err(S3Error::with_message(
                            S3ErrorCode::MethodNotAllowed,
                            format!(
                                "workspace {ws:?} still holds {n} record(s); destroy its resources first. Nothing was deleted."
                            ),
                        ));
                    }
                    EstateDeleted::Changed => {
                        return Err(S3Error::with_message(
                            S3ErrorCode::PreconditionFailed,
                            format!(
                                "workspace {ws:?} was written by another run while it was deleted; nothing was deleted"
                            ),
                        ));
                    }
                }
            }
            Object::Other => return Err(not_served(&input.key)),
        }
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let prefix = input.prefix.clone().unwrap_or_default();
        let contents = self.list(&input.bucket, &prefix).await?;
        Ok(S3Response::new(ListObjectsV2Output {
            key_count: Some(contents.len() as i32),
            is_truncated: Some(false),
            name: Some(input.bucket),
            prefix: input.prefix,
            max_keys: input.max_keys,
            contents: Some(contents),
            ..Default::default()
        }))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let input = req.input;
        let prefix = input.prefix.clone().unwrap_or_default();
        let contents = self.list(&input.bucket, &prefix).await?;
        Ok(S3Response::new(ListObjectsOutput {
            is_truncated: Some(false),
            name: Some(input.bucket),
            prefix: input.prefix,
            max_keys: input.max_keys,
            contents: Some(contents),
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let input = req.input;
        if !matches!(self.object(&input.bucket, &input.key)?, Object::State(_)) {
            return Err(not_served(&input.key));
        }
        let id = self.uploads.start(&input.key).await;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let input = req.input;
        let body = self.body(input.body, self.limit()).await?;
        let tag = etag(&body);
        self.uploads
            .part(
                &input.upload_id,
                &input.key,
                input.part_number,
                body,
                self.limit(),
            )
            .await?;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(tag),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        let parts: Vec<i32> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.part_number)
            .collect();
        let body = self
            .uploads
            .complete(&input.upload_id, &input.key, &parts)
            .await?;
        let tag = self.write(&input.bucket, &input.key, body).await?;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(tag),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.uploads.abort(&req.input.upload_id).await;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}
