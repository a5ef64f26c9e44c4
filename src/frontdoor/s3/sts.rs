//! STS `GetCallerIdentity`, which terraform's s3 backend calls to validate its credentials
//! (unless `skip_credentials_validation`): answered at the door, after the same SigV4 check as
//! every S3 call, with the run's own identity. Any other STS action is refused by name.

use hyper::http::Extensions;
use hyper::{HeaderMap, Method, StatusCode, Uri};
use s3s::route::S3Route;
use s3s::{Body, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use serde::Serialize;

/// The account the door's identity names: no AWS account.
pub const ACCOUNT: &str = "000000000000";

/// The STS requests of terraform's s3 backend: form posts to `/`.
#[derive(Debug)]
pub struct CallerIdentity;

#[derive(Serialize)]
#[serde(rename = "GetCallerIdentityResponse")]
struct Answer {
    #[serde(rename = "@xmlns")]
    xmlns: &'static str,
    #[serde(rename = "GetCallerIdentityResult")]
    result: Identity,
}

#[derive(Serialize)]
struct Identity {
    #[serde(rename = "Arn")]
    arn: String,
    #[serde(rename = "UserId")]
    user_id: String,
    #[serde(rename = "Account")]
    account: &'static str,
}

#[async_trait::async_trait]
impl S3Route for CallerIdentity {
    fn is_match(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        _: &mut Extensions,
    ) -> bool {
        method == Method::POST
            && uri.path() == "/"
            && headers
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
    }

    async fn call(&self, mut req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let form = req
            .input
            .store_all_limited(64 << 10)
            .await
            .map_err(|e| S3Error::with_message(S3ErrorCode::InvalidRequest, e.to_string()))?;
        let action = url::form_urlencoded::parse(&form)
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if action != "GetCallerIdentity" {
            return Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                format!(
                    "the run's door answers only STS GetCallerIdentity, not {action:?}: terraform's s3 backend under `choudoufu-live run` uses the run's own credentials"
                ),
            ));
        }
        let user = req
            .credentials
            .as_ref()
            .map(|c| c.access_key.clone())
            .unwrap_or_default();
        let answer = Answer {
            xmlns: "https://sts.amazonaws.com/doc/2011-06-15/",
            result: Identity {
                arn: format!("arn:aws:iam::{ACCOUNT}:user/{user}"),
                user_id: user,
                account: ACCOUNT,
            },
        };
        let xml = quick_xml::se::to_string(&answer).map_err(S3Error::internal_error)?;
        let mut response = S3Response::new(Body::from(xml));
        response.status = Some(StatusCode::OK);
        response.headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/xml"),
        );
        Ok(response)
    }
}
