//! The error every store kind raises for a call that failed other than by a conditional-write conflict,
//! and why it failed: the store could not be reached, refused the credentials, or answered with an error.

use std::fmt;

use thiserror::Error;

use super::call::StoreCall;
use super::settings::kind::StoreKind;

/// The cause of a failed store call: the SDK's, HTTP client's or file system's own error.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store call failed, as its cause says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The store did not answer: the connection was refused, reset or timed out.
    Unreachable,
    /// The store answered that the credentials are not accepted (401/403, an expired token).
    CredentialsRefused,
    /// The store answered that the bucket or container does not exist (S3 `NoSuchBucket`, Azure `ContainerNotFound`).
    Missing,
    /// The store answered, with an error of another kind.
    Answered,
}

/// The environment variable that adds each failed store call's whole chain of causes to its message.
pub const VERBOSE_ENV: &str = "CHOUDOUFU_VERBOSE";

/// Whether `CHOUDOUFU_VERBOSE` asks for whole error chains (set, and neither empty nor `0`/`false`).
pub fn verbose() -> bool {
    static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VERBOSE.get_or_init(|| {
        std::env::var(VERBOSE_ENV).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
    })
}

impl Reason {
    /// Whether the store is unavailable to this program (unreachable, or the credentials refused).
    pub fn unavailable(self) -> bool {
        matches!(self, Reason::Unreachable | Reason::CredentialsRefused)
    }

    /// One line of what to do about a failure for this reason, for `store` at `endpoint`.
    pub fn advice(self, store: &str, endpoint: Option<&str>) -> String {
        let at = endpoint.map(|e| format!(" at {e}")).unwrap_or_default();
        let more = if verbose() {
            ""
        } else {
            " (CHOUDOUFU_VERBOSE=1 shows the whole error)"
        };
        match self {
            Reason::Unreachable => format!(
                "Check that the endpoint and region in live.hcl are right and that {store}{at} is up and reachable from here; try again once it answers{more}."
            ),
            Reason::CredentialsRefused => format!(
                "Check the credentials this program is given (expired, or without permission on {store}){more}."
            ),
            Reason::Missing => format!(
                "Create it (`choudoufu-live bucket setup` does not create buckets or containers: it sets up an existing one), or fix the name in live.hcl; then `choudoufu-live bucket setup` makes it safe for records{more}."
            ),
            Reason::Answered => {
                format!("The store answered with the error above: its code says why{more}.")
            }
        }
    }

    /// The reason a cause chain shows: the first link that says the store was not reached or refused the credentials.
    pub fn of(cause: &(dyn std::error::Error + 'static)) -> Reason {
        let mut link: Option<&(dyn std::error::Error + 'static)> = Some(cause);
        while let Some(e) = link {
            if let Some(reason) = reason_of_link(e) {
                return reason;
            }
            link = e.source();
        }
        Reason::Answered
    }
}

fn reason_of_io(kind: std::io::ErrorKind) -> Option<Reason> {
    use std::io::ErrorKind as K;
    matches!(
        kind,
        K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::BrokenPipe
            | K::TimedOut
            | K::AddrNotAvailable
            | K::HostUnreachable
            | K::NetworkUnreachable
            | K::NetworkDown
    )
    .then_some(Reason::Unreachable)
}

fn credentials_status(status: u16) -> Option<Reason> {
    matches!(status, 401 | 403).then_some(Reason::CredentialsRefused)
}

fn reason_of_link(e: &(dyn std::error::Error + 'static)) -> Option<Reason> {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return reason_of_io(io.kind());
    }
    if let Some(c) = e.downcast_ref::<aws_sdk_s3::error::ConnectorError>() {
        return (c.is_io() || c.is_timeout()).then_some(Reason::Unreachable);
    }
    if let Some(r) = e.downcast_ref::<reqwest::Error>() {
        if r.is_connect() || r.is_timeout() || r.is_request() {
            return Some(Reason::Unreachable);
        }
        return r.status().and_then(|s| credentials_status(s.as_u16()));
    }
    if let Some(h) = e.downcast_ref::<object_store::client::HttpError>() {
        use object_store::client::HttpErrorKind as K;
        return matches!(
            h.kind(),
            K::Connect | K::Request | K::Timeout | K::Interrupted
        )
        .then_some(Reason::Unreachable);
    }
    if let Some(o) = e.downcast_ref::<object_store::Error>() {
        return matches!(
            o,
            object_store::Error::Unauthenticated { .. }
                | object_store::Error::PermissionDenied { .. }
        )
        .then_some(Reason::CredentialsRefused);
    }
    if let Some(u) = e.downcast_ref::<super::unexpected::UnexpectedStatus>() {
        let missing = u.status == 404
            && ["ContainerNotFound", "NoSuchBucket", "bucket does not exist"]
                .iter()
                .any(|code| u.body.contains(code));
        if missing {
            return Some(Reason::Missing);
        }
        return credentials_status(u.status);
    }
    None
}

/// Which store a call went to: its kind, and its name as messages give it (`s3://bucket`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreName {
    /// The store's kind.
    pub kind: StoreKind,
    /// Its name, e.g. `s3://bucket` or `azurerm://account/container`.
    pub name: String,
}

impl StoreName {
    /// The store of `kind` named `name`.
    pub fn new(kind: StoreKind, name: impl Into<String>) -> Self {
        StoreName {
            kind,
            name: name.into(),
        }
    }
}

impl fmt::Display for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A record store call failed for a reason other than a conditional-write conflict.
///
/// One that could not reach the store, or whose credentials were refused, reads as
/// `StoreUnavailable` with the endpoint it tried.
#[derive(Debug, Error)]
pub struct StoreError {
    /// The store, e.g. `s3://bucket`.
    pub store: StoreName,
    /// The call that failed.
    pub op: StoreCall,
    /// The key concerned (the prefix, for a listing).
    pub key: String,
    /// What the store said, as the user reads it: one line (the service's error code and message, or the root cause).
    pub message: Box<str>,
    /// Why it failed, from the cause (or as the store kind knew better).
    pub reason: Reason,
    /// The endpoint the call went to, when it is known (e.g. `https://s3.eu-west-1.amazonaws.com`).
    pub endpoint: Option<Box<str>>,
    /// The underlying error.
    #[source]
    pub source: Cause,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match &self.endpoint {
            Some(e) => format!(" at {e}"),
            None => String::new(),
        };
        match self.reason {
            Reason::Unreachable => write!(
                f,
                "StoreUnavailable: record store {}{at} could not be reached: {} {} failed: {}",
                self.store, self.op, self.key, self.message
            )?,
            Reason::CredentialsRefused => write!(
                f,
                "StoreUnavailable: record store {}{at} refused the credentials: {} {} failed: {}",
                self.store, self.op, self.key, self.message
            )?,
            Reason::Missing => write!(
                f,
                "record store {}{at}: the {} does not exist: {} {} failed: {}",
                self.store,
                container_word(self.store.kind),
                self.op,
                self.key,
                self.message
            )?,
            Reason::Answered => write!(
                f,
                "record store {}{at}: {} {} failed: {}",
                self.store, self.op, self.key, self.message
            )?,
        }
        if verbose() {
            // The whole chain, and the cause as its SDK or client shows it (a debug dump).
            let whole = aws_smithy_types::error::display::DisplayErrorContext(self.source.as_ref());
            write!(f, " [{VERBOSE_ENV}: {whole}]")?;
        }
        Ok(())
    }
}

impl StoreError {
    /// A failed `op` on `key` of `store`, caused by `source` (whose text is the message, and whose chain gives the reason).
    pub fn new(
        store: StoreName,
        op: StoreCall,
        key: impl Into<String>,
        source: impl Into<Cause>,
    ) -> Self {
        let source = source.into();
        let reason = Reason::of(source.as_ref());
        let endpoint = endpoint_of(source.as_ref());
        StoreError {
            store,
            op,
            key: key.into(),
            message: source.to_string().into_boxed_str(),
            reason,
            endpoint,
            source,
        }
    }

    /// The same error with a fuller message than the cause's own text (e.g. the SDK's error context).
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into().into_boxed_str();
        self
    }

    /// One line of what to do about this failure.
    pub fn advice(&self) -> String {
        self.reason
            .advice(&self.store.name, self.endpoint.as_deref())
    }

    /// The same error with the reason the store kind knows from its typed error.
    pub fn because(mut self, reason: Reason) -> Self {
        self.reason = reason;
        self
    }

    /// The same error naming the endpoint the call went to.
    pub fn at(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into().into_boxed_str());
        self
    }

    /// Whether the store is unavailable to this program (unreachable, or the credentials refused).
    pub fn unavailable(&self) -> bool {
        self.reason.unavailable()
    }
}

/// An error and its causes, one after the other (`a: b: c`), each said once.
pub fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(e) = link {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        link = e.source();
    }
    parts.join(": ")
}

/// "bucket" or "container", as a store of `kind` names what holds its records.
pub fn container_word(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::Azure => "container",
        StoreKind::S3 | StoreKind::Gcs | StoreKind::Local => "bucket",
    }
}

/// The deepest cause of an error: what failed at the bottom (e.g. `Connection refused (os error 111)`).
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// Whether the chain says no connection was made at all: refused, a failed name lookup, a connect timeout.
///
/// Such a try reached no server, so trying again soon rarely helps: retries give up early on it.
pub fn unreached(cause: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as K;
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(cause);
    while let Some(e) = link {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                K::ConnectionRefused
                    | K::AddrNotAvailable
                    | K::HostUnreachable
                    | K::NetworkUnreachable
                    | K::NetworkDown
            )
        {
            return true;
        }
        if e.downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_connect)
        {
            return true;
        }
        if e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return true;
        }
        if e.downcast_ref::<aws_sdk_s3::error::ConnectorError>()
            .is_some_and(aws_sdk_s3::error::ConnectorError::is_timeout)
        {
            // The S3 client sets no read timeout: a connector timeout is the connect timeout.
            return true;
        }
        link = e.source();
    }
    false
}

/// The scheme, host and port an HTTP error in the chain names.
fn endpoint_of(cause: &(dyn std::error::Error + 'static)) -> Option<Box<str>> {
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(cause);
    while let Some(e) = link {
        if let Some(url) = e
            .downcast_ref::<reqwest::Error>()
            .and_then(reqwest::Error::url)
        {
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            return Some(
                format!("{}://{}{port}", url.scheme(), url.host_str().unwrap_or(""))
                    .into_boxed_str(),
            );
        }
        link = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_is_unavailable_and_named_so() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let e = StoreError::new(
            StoreName::new(StoreKind::S3, "s3://b"),
            StoreCall::Update,
            "tofu-records/e/r/x",
            io,
        )
        .at("http://127.0.0.1:9");
        assert_eq!(e.reason, Reason::Unreachable);
        assert!(e.unavailable());
        let text = e.to_string();
        assert!(
            text.starts_with(
                "StoreUnavailable: record store s3://b at http://127.0.0.1:9 could not be reached"
            ),
            "{text}"
        );
        assert!(text.contains("connection refused"), "{text}");
    }

    #[test]
    fn a_refused_credential_is_unavailable_and_an_answer_is_not() {
        let denied = super::super::unexpected::UnexpectedStatus {
            status: 403,
            body: "AuthorizationFailure".into(),
        };
        let e = StoreError::new(
            StoreName::new(StoreKind::Azure, "azurerm://a/c"),
            StoreCall::Get,
            "k",
            denied,
        );
        assert_eq!(e.reason, Reason::CredentialsRefused);
        assert!(e.to_string().contains("refused the credentials"), "{e}");
        let busy = super::super::unexpected::UnexpectedStatus {
            status: 500,
            body: "oops".into(),
        };
        let e = StoreError::new(
            StoreName::new(StoreKind::Gcs, "gs://b"),
            StoreCall::Get,
            "k",
            busy,
        );
        assert_eq!(e.reason, Reason::Answered);
        assert!(
            e.to_string()
                .starts_with("record store gs://b: get k failed"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_container_is_its_own_reason_with_what_to_do() {
        let missing = super::super::unexpected::UnexpectedStatus {
            status: 404,
            body: "<Error><Code>ContainerNotFound</Code></Error>".into(),
        };
        let e = StoreError::new(
            StoreName::new(StoreKind::Azure, "azurerm://a/c"),
            StoreCall::List,
            "tofu-records/e/",
            missing,
        );
        assert_eq!(e.reason, Reason::Missing);
        assert!(!e.unavailable());
        assert!(
            e.to_string().contains("the container does not exist"),
            "{e}"
        );
        assert!(e.advice().contains("does not create buckets or containers"));
        assert!(!e.advice().contains("once it answers"));
    }

    #[test]
    fn the_reason_is_found_deep_in_the_chain() {
        #[derive(Debug, Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = StoreError::new(
            StoreName::new(StoreKind::Local, "local:/x"),
            StoreCall::Get,
            "k",
            Outer(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            )),
        );
        assert_eq!(e.reason, Reason::Unreachable);
    }
}
