//! Shared test setup: real peers only (a local folder, moto_server for S3, azurite for Azure
//! Blob Storage, gcp-storage-emulator for GCS, the real terraform). A crate of its own, so each
//! test binary uses what it needs and the rest is not dead code.

pub mod aws_objects;
pub mod cdftest;
pub mod fault_proxy;
pub mod http1;
pub mod interposed;
pub mod latency_proxy;
pub mod plugin_host;
pub mod procs;
pub mod s3door;
pub mod state;
pub mod tf;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use choudoufu_live::store::DynStore;
use choudoufu_live::store::azure::{AzureSettings, AzureStore};
use choudoufu_live::store::gcs::{GcsSettings, GcsStore};
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

/// moto's `host:port`, as the proxies in front of it take their upstream.
pub fn s3_authority() -> String {
    s3_endpoint().trim_start_matches("http://").to_string()
}

/// A tokio runtime of one worker, for a synchronous test that drives a proxy or an SDK call.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
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
        profile: None,
        role_arn: None,
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
    choudoufu_live::store::s3::bucket::setup(store.client(), &bucket)
        .await
        .expect("bucket setup on moto");
    (store, bucket)
}

/// Another client (its own connections) on the same bucket: a second writer at the wire.
pub async fn s3_peer(bucket: &str) -> S3Store {
    S3Store::connect(&s3_settings(bucket)).await
}

fn loopback_var(name: &str) -> String {
    match std::env::var(name) {
        Ok(e) if e.starts_with("http://127.0.0.1:") => e,
        Ok(e) => panic!("{name}={e} is not a loopback address; tests talk to loopback only"),
        Err(_) => panic!(
            "{name} is not set: these tests need the peers scripts/with-peers starts. Run them with `make test` (or scripts/with-peers cargo test)."
        ),
    }
}

/// Azure settings for `container` on azurite (the development account's key).
pub fn azure_settings(container: &str) -> AzureSettings {
    AzureSettings {
        storage_account_name: Some(
            std::env::var("CHOUDOUFU_TEST_AZURE_ACCOUNT").unwrap_or("devstoreaccount1".into()),
        ),
        container_name: container.to_string(),
        endpoint: Some(loopback_var("CHOUDOUFU_TEST_AZURE_ENDPOINT")),
        access_key: Some(
            std::env::var("CHOUDOUFU_TEST_AZURE_KEY").expect(
                "CHOUDOUFU_TEST_AZURE_KEY is not set: run the tests with scripts/with-peers",
            ),
        ),
        sas_token: None,
        connection_string: None,
        skip_bucket_checks: false,
    }
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let inner: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    let outer: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    let ih = Sha256::new()
        .chain_update(&inner)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(&outer)
        .chain_update(ih)
        .finalize()
        .to_vec()
}

/// Create a private container on azurite (Create Container, signed with Shared Key): test setup only.
pub async fn create_container(settings: &AzureSettings) {
    create_container_with_access(settings, None).await
}

/// Create a container on azurite with a public access level (`container`, `blob`) or none.
pub async fn create_container_with_access(settings: &AzureSettings, public: Option<&str>) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let account = settings.storage_account_name.clone().unwrap();
    let endpoint = settings.endpoint.clone().unwrap();
    let url = format!("{endpoint}/{}?restype=container", settings.container_name);
    let path = url::Url::parse(&url).unwrap().path().to_string();
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let version = "2021-08-06";
    let access = public
        .map(|p| format!("x-ms-blob-public-access:{p}\n"))
        .unwrap_or_default();
    let to_sign = format!(
        "PUT\n\n\n\n\n\n\n\n\n\n\n\n{access}x-ms-date:{date}\nx-ms-version:{version}\n/{account}{path}\nrestype:container"
    );
    let key = b64.decode(settings.access_key.as_ref().unwrap()).unwrap();
    let sig = b64.encode(hmac_sha256(&key, to_sign.as_bytes()));
    let mut request = reqwest::Client::new().put(&url);
    if let Some(p) = public {
        request = request.header("x-ms-blob-public-access", p);
    }
    let response = request
        .header("x-ms-date", date)
        .header("x-ms-version", version)
        .header("Content-Length", "0")
        .header("Authorization", format!("SharedKey {account}:{sig}"))
        .send()
        .await
        .expect("create container on azurite");
    assert!(
        response.status().is_success(),
        "create container on azurite: {} {}",
        response.status(),
        response.text().await.unwrap_or_default()
    );
}

/// A fresh container on azurite and a store on it, made safe as far as azurite can show
/// (blob soft delete, a private container), so a run's write guard passes as on S3.
pub async fn azure_store(tag: &str) -> (AzureStore, AzureSettings) {
    let settings = azure_settings(&unique_bucket(tag));
    create_container(&settings).await;
    let store = AzureStore::connect(&settings);
    choudoufu_live::store::azure::safety::setup(&store)
        .await
        .expect("safety setup on azurite");
    (store, settings)
}

/// GCS settings for `bucket` on gcp-storage-emulator (no credentials).
pub fn gcs_settings(bucket: &str) -> GcsSettings {
    GcsSettings {
        bucket: bucket.to_string(),
        endpoint: Some(loopback_var("CHOUDOUFU_TEST_GCS_ENDPOINT")),
        credentials: None,
        skip_credentials: true,
        skip_bucket_checks: false,
    }
}

/// A fresh bucket on gcp-storage-emulator and a store on it, with the bucket safety settings on
/// (the emulator stores them), so a run's write guard passes as on S3.
pub async fn gcs_store(tag: &str) -> (GcsStore, GcsSettings) {
    let (store, settings) = gcs_bucket_unsafe(tag).await;
    choudoufu_live::store::gcs::safety::setup(&store)
        .await
        .expect("safety setup on gcp-storage-emulator");
    (store, settings)
}

/// A fresh bucket on gcp-storage-emulator with none of the safety settings.
pub async fn gcs_bucket_unsafe(tag: &str) -> (GcsStore, GcsSettings) {
    let settings = gcs_settings(&unique_bucket(tag));
    let response = reqwest::Client::new()
        .post(format!(
            "{}/storage/v1/b?project=test",
            settings.endpoint.as_ref().unwrap()
        ))
        .json(&serde_json::json!({ "name": settings.bucket }))
        .send()
        .await
        .expect("create bucket on gcp-storage-emulator");
    assert!(
        response.status().is_success(),
        "create bucket on gcp-storage-emulator: {}",
        response.status()
    );
    (GcsStore::connect(&settings), settings)
}

/// The kinds every behaviour runs against.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Local,
    S3,
    Azure,
    Gcs,
}

/// A fresh store of `kind`, plus a factory for more writers on the same store.
pub struct Fixture {
    pub store: DynStore,
    pub dir: Option<tempfile::TempDir>,
    pub bucket: Option<String>,
    pub azure: Option<AzureSettings>,
    pub gcs: Option<GcsSettings>,
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
                    azure: None,
                    gcs: None,
                    kind,
                }
            }
            Kind::S3 => {
                let (store, bucket) = s3_store(tag).await;
                Fixture {
                    store: Arc::new(store),
                    dir: None,
                    bucket: Some(bucket),
                    azure: None,
                    gcs: None,
                    kind,
                }
            }
            Kind::Azure => {
                let (store, settings) = azure_store(tag).await;
                Fixture {
                    store: Arc::new(store),
                    dir: None,
                    bucket: Some(settings.container_name.clone()),
                    azure: Some(settings),
                    gcs: None,
                    kind,
                }
            }
            Kind::Gcs => {
                let (store, settings) = gcs_store(tag).await;
                Fixture {
                    store: Arc::new(store),
                    dir: None,
                    bucket: Some(settings.bucket.clone()),
                    azure: None,
                    gcs: Some(settings),
                    kind,
                }
            }
        }
    }

    /// Another writer on the same store, with its own connections (S3, Azure, GCS) or handle (local).
    pub async fn peer(&self) -> DynStore {
        match self.kind {
            Kind::Local => Arc::new(LocalStore::new(
                self.dir.as_ref().expect("local dir").path().join("records"),
            )),
            Kind::S3 => Arc::new(s3_peer(self.bucket.as_ref().expect("bucket")).await),
            Kind::Azure => Arc::new(AzureStore::connect(self.azure.as_ref().expect("azure"))),
            Kind::Gcs => Arc::new(GcsStore::connect(self.gcs.as_ref().expect("gcs"))),
        }
    }
}

/// One module per store kind, each running every named test against that kind: the test
/// `name` is `async fn name(kind: Kind)` in the calling file, and
/// `per_kind!(local => Local, s3 => S3; [a, b]);` makes the tests `local::a`, `local::b`,
/// `s3::a`, `s3::b`. An attribute first (`per_kind!(#[tokio::test] ...)`) says how each test
/// runs; without one it runs on a two-worker multi-thread runtime.
#[macro_export]
macro_rules! per_kind {
    (@module #[$test:meta] $module:ident, $kind:ident, [$($name:ident),* $(,)?]) => {
        mod $module {
            $( #[$test] async fn $name() { super::$name($crate::Kind::$kind).await; } )*
        }
    };
    (#[$test:meta] $($module:ident => $kind:ident),+ ; $names:tt) => {
        $( $crate::per_kind!(@module #[$test] $module, $kind, $names); )+
    };
    ($($module:ident => $kind:ident),+ ; $names:tt) => {
        $crate::per_kind!(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $($module => $kind),+ ; $names
        );
    };
}
