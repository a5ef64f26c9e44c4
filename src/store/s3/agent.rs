//! The S3 SDK's second user agent header, left off every request.
//!
//! The SDK sends its agent twice: `User-Agent` and `x-amz-user-agent`, each some 150-250 bytes
//! naming the SDK, the OS and the language. S3 needs neither; `User-Agent` is kept (servers and
//! proxies log it) and the copy is dropped before the request is signed, so a record write's
//! request is that much smaller (`make bench`, B2).

use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};

/// The header dropped.
const AMZ_USER_AGENT: &str = "x-amz-user-agent";

/// The interceptor that drops `x-amz-user-agent`.
#[derive(Debug)]
pub(super) struct OneUserAgent;

impl Intercept for OneUserAgent {
    fn name(&self) -> &'static str {
        "choudoufu-live one user agent"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_s3::error::BoxError> {
        context.request_mut().headers_mut().remove(AMZ_USER_AGENT);
        Ok(())
    }
}
