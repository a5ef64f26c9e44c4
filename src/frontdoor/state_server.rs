//! The state server of one run, whichever door it is: the http backend or the S3 door.

use super::{http, s3};

/// A run's running state server.
pub enum StateServer {
    /// `backend "http"`: [`http::Server`].
    Http(http::Server),
    /// `backend "s3"`: [`s3::Server`].
    S3(s3::Server),
}

impl StateServer {
    /// The variables terraform needs to reach it.
    pub fn terraform_env(&self) -> Vec<(&'static str, String)> {
        match self {
            StateServer::Http(s) => s.terraform_env(),
            StateServer::S3(s) => s.terraform_env(),
        }
    }

    /// The variables of the user's environment taken out of terraform's.
    pub fn cleared_env(&self) -> &'static [&'static str] {
        match self {
            StateServer::Http(_) => &[],
            StateServer::S3(_) => &s3::CLEARED_ENV,
        }
    }

    /// Where it listens, for the log.
    pub fn url(&self) -> String {
        match self {
            StateServer::Http(s) => s.state_url(),
            StateServer::S3(s) => s.endpoint(),
        }
    }

    /// Stop serving.
    pub async fn stop(self) {
        match self {
            StateServer::Http(s) => s.stop().await,
            StateServer::S3(s) => s.stop().await,
        }
    }
}
