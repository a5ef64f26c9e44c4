//! The S3 SDK's retries of a store it cannot connect to, cut to the store's unreached budget.
//!
//! The SDK's standard retry tries a refused connection or a failed name lookup as often as a
//! busy service. This interceptor notes when each call began and, after a try that made no
//! connection, lowers that call's tries to the ones made once [`RetryPolicy::unreached`] is spent,
//! so the call gives up in seconds; a call any try of which reached the store keeps its tries.

use std::time::Instant;

use aws_sdk_s3::config::interceptors::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use crate::store::error::unreached;
use crate::store::retry::RetryPolicy;

/// The interceptor that gives a call up once its unreached budget is spent.
#[derive(Debug)]
pub(super) struct UnreachedBudget {
    /// The store's policy: its unreached budget, its backoff and its tries.
    pub(super) policy: RetryPolicy,
}

/// One call's tries so far, kept in its own config bag.
#[derive(Clone, Debug)]
struct Tries {
    first: Instant,
    made: u32,
    all_unreached: bool,
}

impl Storable for Tries {
    type Storer = StoreReplace<Self>;
}

impl Intercept for UnreachedBudget {
    fn name(&self) -> &'static str {
        "choudoufu-live unreached budget"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_s3::error::BoxError> {
        cfg.interceptor_state().store_put(Tries {
            first: Instant::now(),
            made: 0,
            all_unreached: true,
        });
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_s3::error::BoxError> {
        let Some(mut tries) = cfg.load::<Tries>().cloned() else {
            return Ok(());
        };
        tries.made += 1;
        let missed = matches!(
            context.output_or_error(),
            Some(Err(e)) if e.as_connector_error().is_some_and(|c| unreached(c))
        );
        tries.all_unreached &= missed;
        let wait = self.policy.backoff.ceiling(tries.made);
        let give_up =
            tries.all_unreached && self.policy.gives_up_unreached(tries.first.elapsed(), wait);
        let made = tries.made;
        cfg.interceptor_state().store_put(tries);
        if give_up && let Some(retry) = cfg.load::<RetryConfig>().cloned() {
            // The standard strategy reads the tries from the bag before each retry: none is left.
            cfg.interceptor_state()
                .store_put(retry.with_max_attempts(made.max(1)));
        }
        Ok(())
    }
}
