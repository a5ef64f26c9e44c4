//! The provider door: `run` starts each provider plugin of the root itself and hands terraform a proxy for it.
//!
//! Terraform reaches each provider of the lock file through `TF_REATTACH_PROVIDERS`
//! ([`reattach`]) at a unix socket in a folder only the user opens ([`proxy`]); behind it, each
//! terraform connection gets a plugin process of its own, started as go-plugin does
//! ([`launch`], [`client_tls`]) from the package `init` installed, once its `h1:` hash matches
//! the lock file ([`lockfile`]). Every plugin gets a parent-death signal and `run`'s pid is the
//! one terraform watches, so no provider call outlives `run`. While `run` applies a plan, each
//! provider apply call that returns writes its instance's record before terraform hears the
//! answer ([`recorder`]). While a cone plan runs, resource reads are answered from their records
//! and each change is confirmed against the cloud ([`cone`]).

pub mod client_tls;
pub mod cone;
pub mod door;
pub mod dynamic;
pub mod kept_hash;
pub mod launch;
pub mod lockfile;
pub mod marking;
pub mod probe;
pub mod proto;
pub mod proxy;
pub mod reattach;
pub mod recorder;
pub mod schema_cache;
pub mod spares;
pub mod unary;
pub mod used_types;
pub mod validations;
pub mod wire;

pub use door::{Door, DoorError};
pub use recorder::{Crash, Recorder};
