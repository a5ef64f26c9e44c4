//! Shared test setup: real peers only (a local folder, moto_server for S3, the real terraform).
#![allow(dead_code)]

pub mod fault_proxy;
pub mod tf;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use choudoufu_live::store::DynStore;
use choudoufu_live::store::local::LocalStore;
use choudoufu_live::store::s3::{S3Settings, S3Store};

/// The moto_server endpoint `scripts/with-moto` started; a loud failure when there is none.
pub fn s3_endpoint() -> String {
    match std::env::var("CHOUDOUFU_TEST_S3_ENDPOINT") {
        Ok(e) if e.starts_with("http://127.0.0.1:") => e,
        Ok(e) => panic!(
            "CHOUDOUFU_TEST_S3_ENDPOINT={e} is not a loopback address; tests talk to loopback only"
        ),
        Err(_) => panic!(
            "S3 tests need moto_server: CHOUDOUFU_TEST_S3_ENDPOINT is not set. Run them with `make test` (or scripts/with-moto cargo test)."
        ),
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A bucket name no other test uses.
pub fn unique_bucket(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("t-{tag}-{n}-{}", &id[..12]).to_lowercase()
}

/// S3 settings for `bucket` on moto.
pub fn s3_settings(bucket: &str) -> S3Settings {
    S3Settings {
        bucket: bucket.to_string(),
        region: Some("us-east-1".into()),
        endpoint: Some(s3_endpoint()),
        use_path_style: Some(true),
        kms_key_id: None,
        skip_bucket_checks: false,
    }
}

/// A fresh bucket on moto and a store on it.
pub async fn s3_store(tag: &str) -> (S3Store, String) {
    let bucket = unique_bucket(tag);
    let store = S3Store::connect(&s3_settings(&bucket)).await;
    store
        .client()
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("create bucket on moto");
    // The run wrapper and plugin check the bucket before the first write: make it safe.
    choudoufu_live::bucket::setup(store.client(), &bucket)
        .await
        .expect("bucket setup on moto");
    (store, bucket)
}

/// Another client (its own connections) on the same bucket: a second writer at the wire.
pub async fn s3_peer(bucket: &str) -> S3Store {
    S3Store::connect(&s3_settings(bucket)).await
}

/// The two kinds every behaviour runs against.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Local,
    S3,
}

/// A fresh store of `kind`, plus a factory for more writers on the same store.
pub struct Fixture {
    pub store: DynStore,
    pub dir: Option<tempfile::TempDir>,
    pub bucket: Option<String>,
    pub kind: Kind,
}

impl Fixture {
    pub async fn new(kind: Kind, tag: &str) -> Fixture {
        match kind {
            Kind::Local => {
                let dir = tempfile::tempdir().expect("tempdir");
                let store: DynStore = Arc::new(LocalStore::new(dir.path().join("records")));
                Fixture {
                    store,
                    dir: Some(dir),
                    bucket: None,
                    kind,
                }
            }
            Kind::S3 => {
                let (store, bucket) = s3_store(tag).await;
                Fixture {
                    store: Arc::new(store),
                    dir: None,
                    bucket: Some(bucket),
                    kind,
                }
            }
        }
    }

    /// Another writer on the same store, with its own connections (S3) or handle (local).
    pub async fn peer(&self) -> DynStore {
        match self.kind {
            Kind::Local => Arc::new(LocalStore::new(
                self.dir.as_ref().expect("local dir").path().join("records"),
            )),
            Kind::S3 => Arc::new(s3_peer(self.bucket.as_ref().expect("bucket")).await),
        }
    }
}
