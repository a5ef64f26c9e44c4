//! STS `GetCallerIdentity`, which terraform's s3 backend calls to validate its credentials
//! (unless `skip_credentials_validation`), and `AssumeRole`, which it calls for a block's
//! `assume_role`: answered at the door, after the same SigV4 check as every S3 call, with the
//! run's own identity and credentials (the record store assumes the role itself). Any other STS
//! action is refused by name.

use std::sync::Arc;

use hyper::http::Extensions;
use hyper::{HeaderMap, Method, StatusCode, Uri};
use s3s::route::S3Route;
use s3s::{Body, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use serde::Serialize;

use crate::frontdoor::http::Credentials;

/// The account the door's identity names: no AWS account.
pub const ACCOUNT: &str = "000000000000";

/// The STS requests of terraform's s3 backend: form posts to `/`.
pub struct Sts {
    /// The access key terraform signs with.
    pub access_key: &'static str,
    /// The run's credentials, which an assumed role's answer hands back.
    pub credentials: Arc<Credentials>,
}

impl std::fmt::Debug for Sts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sts").finish_non_exhaustive()
    }
}

/// The session token an assumed role's answer carries: the door checks the signature, not the token.
const SESSION_TOKEN: &str = "choudoufu-live-run-session";

#[derive(Serialize)]
#[serde(rename = "AssumeRoleResponse")]
struct RoleAnswer {
    #[serde(rename = "@xmlns")]
    xmlns: &'static str,
    #[serde(rename = "AssumeRoleResult")]
    result: RoleResult,
}

#[derive(Serialize)]
struct RoleResult {
    #[serde(rename = "Credentials")]
    credentials: RoleCredentials,
    #[serde(rename = "AssumedRoleUser")]
    user: RoleUser,
}

#[derive(Serialize)]
struct RoleCredentials {
    #[serde(rename = "AccessKeyId")]
    access_key_id: &'static str,
    #[serde(rename = "SecretAccessKey")]
    secret_access_key: String,
    #[serde(rename = "SessionToken")]
    session_token: &'static str,
    #[serde(rename = "Expiration")]
    expiration: String,
}

#[derive(Serialize)]
struct RoleUser {
    #[serde(rename = "AssumedRoleId")]
    id: String,
    #[serde(rename = "Arn")]
    arn: String,
}

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
impl S3Route for Sts {
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
        let xml = match action.as_str() {
            "GetCallerIdentity" => caller_identity(&req),
            "AssumeRole" => self.assume_role(),
            _ => {
                return Err(S3Error::with_message(
                    S3ErrorCode::NotImplemented,
                    format!(
                        "the run's door answers only STS GetCallerIdentity and AssumeRole, not {action:?}: terraform's s3 backend under `choudoufu-live run` uses the run's own credentials"
                    ),
                ));
            }
        }?;
        let mut response = S3Response::new(Body::from(xml));
        response.status = Some(StatusCode::OK);
        response.headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/xml"),
        );
        Ok(response)
    }
}

impl Sts {
    /// An assumed role's answer: the run's own credentials, for an hour.
    fn assume_role(&self) -> S3Result<String> {
        let expires = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
        let expiration = expires
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(S3Error::internal_error)?;
        let answer = RoleAnswer {
            xmlns: XMLNS,
            result: RoleResult {
                credentials: RoleCredentials {
                    access_key_id: self.access_key,
                    secret_access_key: self.credentials.secret().to_string(),
                    session_token: SESSION_TOKEN,
                    expiration,
                },
                user: RoleUser {
                    id: format!("{}:choudoufu-live", self.access_key),
                    arn: format!(
                        "arn:aws:sts::{ACCOUNT}:assumed-role/choudoufu-live-run/choudoufu-live"
                    ),
                },
            },
        };
        quick_xml::se::to_string(&answer).map_err(S3Error::internal_error)
    }
}

/// STS's XML namespace.
const XMLNS: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

/// The caller's identity: the run's.
fn caller_identity(req: &S3Request<Body>) -> S3Result<String> {
    let user = req
        .credentials
        .as_ref()
        .map(|c| c.access_key.clone())
        .unwrap_or_default();
    let answer = Answer {
        xmlns: XMLNS,
        result: Identity {
            arn: format!("arn:aws:iam::{ACCOUNT}:user/{user}"),
            user_id: user,
            account: ACCOUNT,
        },
    };
    quick_xml::se::to_string(&answer).map_err(S3Error::internal_error)
}
