//! What a command reports to the user when it fails, and the exit status it gives.

use crate::engine::session::SessionError;
use crate::run::RunError;
use crate::store::StoreError;

/// Exit status for an error before or outside terraform (config, store, input).
pub const EXIT_ERROR: i32 = 1;

/// Any error a command reports to the user.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// The text a failed command prints on stderr: `Error: ` and the error, then one line of what to do when a store call failed.
pub fn report(e: &(dyn std::error::Error + 'static)) -> String {
    match store_error_in(e) {
        Some(store) => format!("Error: {e}\n{}", store.advice()),
        None => format!("Error: {e}"),
    }
}

/// The store error a session error is, if it is one (a transparent wrapper hides it from the chain).
fn of_session(e: &SessionError) -> Option<&StoreError> {
    match e {
        SessionError::Store(s) => Some(s),
        _ => None,
    }
}

/// The first store error in `e`'s chain, if any.
fn store_error_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a StoreError> {
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(e) = link {
        if let Some(store) = e.downcast_ref::<StoreError>() {
            return Some(store);
        }
        if let Some(store) = e.downcast_ref::<SessionError>().and_then(of_session) {
            return Some(store);
        }
        let in_run = match e.downcast_ref::<RunError>() {
            Some(RunError::Store(s) | RunError::StoreRefused(s)) => Some(s),
            Some(RunError::Session(s)) => of_session(s),
            _ => None,
        };
        if in_run.is_some() {
            return in_run;
        }
        link = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_is_one_line_of_cause_and_one_of_advice() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let e = StoreError::new(
            crate::store::StoreName::new(crate::store::StoreKind::S3, "s3://b"),
            crate::store::StoreCall::List,
            "tofu-records/e/",
            io,
        )
        .at("http://127.0.0.1:9");
        #[derive(Debug, thiserror::Error)]
        #[error("records: {0}")]
        struct Outer(#[source] StoreError);
        let text = report(&Outer(e));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with(
                "Error: records: StoreUnavailable: record store s3://b at http://127.0.0.1:9"
            ),
            "{text}"
        );
        assert!(lines[1].contains("once it answers"), "{text}");
        assert_eq!(report(&std::io::Error::other("no")), "Error: no");
    }
}
