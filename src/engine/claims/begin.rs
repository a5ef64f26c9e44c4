//! One change claimed at a time, as the choudoufu protocol's BeginChange asks: the engine's side of that call.

use thiserror::Error;

use super::claim::{ClaimError, Claims};
use super::holder::TakenOver;
use super::liveness::Liveness;
use super::refusal::ClaimRefused;
use super::wanted::Wanted;
use crate::engine::address::resource_of;
use crate::engine::layout::Layout;
use crate::engine::operation::Operation;
use crate::store::{DynStore, Version};

/// The outcome of marking one change (the choudoufu protocol's BeginChange).
#[derive(Clone, Debug)]
pub struct Marked {
    /// The mark's version (to clear it with).
    pub version: Version,
    /// Marks of gone runs this run took over.
    pub taken_over: Vec<TakenOver>,
}

/// A change that could not be marked.
#[derive(Debug, Error)]
pub enum BeginChangeError {
    /// The claim could not be made; nothing is held.
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// The claim was granted without the mark it asked for (a bug: a granted claim holds every change it asked for).
    #[error("the claim of {address} was granted but holds no mark on it")]
    Unheld {
        /// The change's address.
        address: String,
    },
}

/// Mark `address` as in flight in run `run`, unless it or a related resource is in flight in another live run.
///
/// The dependencies may name instances: only the resources they belong to count.
pub async fn begin_change(
    store: &DynStore,
    layout: &Layout,
    run: &Liveness,
    address: &str,
    operation: Operation,
    dependencies: &[String],
) -> Result<Result<Marked, ClaimRefused>, BeginChangeError> {
    let wanted = [Wanted {
        address: address.to_string(),
        operation,
        dependencies: dependencies.iter().map(|d| resource_of(d)).collect(),
    }];
    let claims = match Claims::claim(store, layout, run, &wanted).await? {
        Ok(claims) => claims,
        Err(refused) => return Ok(Err(refused)),
    };
    let version = claims
        .version(address)
        .ok_or_else(|| BeginChangeError::Unheld {
            address: address.to_string(),
        })?;
    Ok(Ok(Marked {
        version,
        taken_over: claims.taken_over().to_vec(),
    }))
}
