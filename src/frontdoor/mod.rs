//! The front doors: each translates one protocol into engine calls, and words its answers alike.
//!
//! - [`http`]: a per-run loopback backend for terraform's `backend "http"` (stock terraform
//!   and tofu of any version), served by `choudoufu-live run -- terraform ...`;
//! - [`plugin`]: the go-plugin gRPC server terraform launches, with the tfplugin6 state
//!   store and the `choudoufu.live.v1` record protocol;
//! - [`provider`]: the provider door `run` puts between terraform and each provider plugin;
//! - [`s3`]: a per-run S3 endpoint for terraform's own `backend "s3"`, workspaces included,
//!   served by `run` for a root whose backend is `s3`.

pub mod http;
pub mod plugin;
pub mod provider;
pub mod s3;
pub mod state_server;

/// The answer to every lock request, at every door: there is no lock.
pub const NO_LOCK: &str =
    "no lock: choudoufu-live holds no locks; every record write is conditional";
