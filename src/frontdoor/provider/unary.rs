//! One unary gRPC call of the door's own on a plugin's HTTP/2 connection: a message out, a message back.

use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use thiserror::Error;

use super::schema_cache::{frame, framed_message, grpc_field};

/// An error of a body the door sends or receives.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a request or answer on a plugin connection.
pub type Body = BoxBody<Bytes, BoxError>;

/// Why a call of the door's own got no answer message.
#[derive(Debug, Error)]
pub enum UnaryError {
    /// The request could not be made, sent or answered in time.
    #[error("{0}")]
    Transport(String),
    /// The plugin answered with a gRPC status other than OK.
    #[error("gRPC status {status}: {message}")]
    Status {
        /// The status code.
        status: String,
        /// Its message.
        message: String,
    },
    /// The answer is not one uncompressed message.
    #[error("the answer is not one uncompressed message")]
    NotOneMessage,
}

/// Call `path` (`/tfplugin5.Provider/ReadResource`) on `sender` with `message`, waiting `timeout` for each of the answer's head and body; the answer's message.
pub async fn call(
    sender: &SendRequest<Body>,
    path: &str,
    message: &[u8],
    timeout: Duration,
) -> Result<Bytes, UnaryError> {
    let transport = |why: String| UnaryError::Transport(why);
    let req = hyper::Request::post(format!("https://localhost{path}"))
        .header(hyper::header::CONTENT_TYPE, "application/grpc")
        .header("te", "trailers")
        .body(Full::new(frame(message)).map_err(BoxError::from).boxed())
        .map_err(|e| transport(e.to_string()))?;
    let sent = sender.clone().send_request(req);
    let resp = tokio::time::timeout(timeout, sent)
        .await
        .map_err(|_| transport("no answer in time".into()))?
        .map_err(|e| transport(e.to_string()))?;
    let (parts, body) = resp.into_parts();
    let collected = tokio::time::timeout(timeout, body.collect())
        .await
        .map_err(|_| transport("the answer did not end in time".into()))?
        .map_err(|e| transport(e.to_string()))?;
    let trailers = collected.trailers().cloned();
    let field = |name| grpc_field(trailers.as_ref(), &parts.headers, name);
    let status = field("grpc-status").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if status.as_deref() != Some("0") {
        let message = field("grpc-message")
            .map(|v| {
                percent_encoding::percent_decode(v.as_bytes())
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        return Err(UnaryError::Status {
            status: status.unwrap_or_else(|| "none".into()),
            message,
        });
    }
    let body = collected.to_bytes();
    framed_message(&body)
        .map(Bytes::copy_from_slice)
        .ok_or(UnaryError::NotOneMessage)
}
