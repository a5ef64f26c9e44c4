//! The S3 store's clock: the `Date` of a `HeadObject` answer, read by an SDK interceptor
//! (the SDK's outputs and errors do not carry it), whatever the answer's status.

use std::sync::{Arc, Mutex};

use aws_sdk_s3::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};

use super::client::{S3Store, absent};
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::record_store::{NoStoreTime, RecordStore, StoreTime};

/// Keeps the `Date` of the last answer of the one call it is added to.
#[derive(Debug, Default, Clone)]
struct DateOfAnswer(Arc<Mutex<Option<StoreTime>>>);

impl Intercept for DateOfAnswer {
    fn name(&self) -> &'static str {
        "choudoufu-live store clock"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_s3::error::BoxError> {
        let date = context
            .response()
            .headers()
            .get("date")
            .and_then(StoreTime::from_http_date);
        if let (Some(date), Ok(mut kept)) = (date, self.0.lock()) {
            *kept = Some(date);
        }
        Ok(())
    }
}

impl S3Store {
    /// The `Date` of a `HeadObject` of `key`: a missing key's 404 tells the time as well.
    pub(super) async fn clock(&self, key: &str) -> Result<StoreTime, StoreError> {
        let kept = DateOfAnswer::default();
        let outcome = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .customize()
            .interceptor(kept.clone())
            .send()
            .await;
        let date = kept.0.lock().ok().and_then(|d| *d);
        match (date, outcome) {
            (Some(date), Ok(_)) => Ok(date),
            (Some(date), Err(e)) if absent(&e) => Ok(date),
            (_, Err(e)) => Err(self.fail(StoreCall::Time, key, e)),
            (None, Ok(_)) => Err(StoreError::new(
                self.name(),
                StoreCall::Time,
                key,
                NoStoreTime,
            )),
        }
    }
}
