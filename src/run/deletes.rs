//! The delete rules for stock terraform: before it claims, `run` refuses a plan that deletes (or
//! replaces) a resource whose record a newer program wrote, or whose live marker names another
//! estate, so that no provider call is made for it.

use std::fmt;

use futures::{StreamExt, TryStreamExt, stream};

use super::context::Ctx;
use super::error::{EXIT_PLAN_REFUSED, RunError};
use super::say;
use crate::engine::operation::Operation;
use crate::engine::plan::ChangeSet;
use crate::engine::record::Record;
use crate::engine::session::SessionError;
use crate::engine::write::delete_rule::{DeleteBlock, delete_block};

/// How many records are read at once.
const READS: usize = 16;

/// The planned deletes the delete rules stop, in the plan's order.
#[derive(Debug)]
pub struct DeletesRefused(pub Vec<DeleteBlock>);

impl fmt::Display for DeletesRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for block in &self.0 {
            match block {
                DeleteBlock::NewerProgram {
                    address,
                    stored,
                    run,
                } => writeln!(
                    f,
                    "refused to delete {address}: its record was written by a newer program ({}) than this run's ({}); an older checkout does not delete a newer one's resource",
                    stored.short(),
                    run.short()
                )?,
                DeleteBlock::OtherEstate {
                    address,
                    owner,
                    estate,
                } => writeln!(
                    f,
                    "refused to delete {address}: its live marker says estate {owner:?} owns it, not this run's estate {estate:?}"
                )?,
            }
        }
        write!(
            f,
            "nothing was applied and no provider was called; apply from the newer checkout (or the owning estate's root), or change the plan so it keeps these resources"
        )
    }
}

/// Whether the plan deletes the object at its address (a delete, or either half of a replace).
fn deletes(operation: Operation) -> bool {
    match operation {
        Operation::Delete | Operation::Replace => true,
        Operation::Create
        | Operation::Update
        | Operation::Forget
        | Operation::Move
        | Operation::Import => false,
    }
}

/// The planned deletes of `set` that the delete rules stop, read from the records as they are now.
pub async fn blocked(ctx: &Ctx, set: &ChangeSet) -> Result<Vec<DeleteBlock>, RunError> {
    let addresses: Vec<&str> = set
        .resources
        .iter()
        .filter(|c| deletes(c.operation))
        .map(|c| c.address.as_str())
        .collect();
    let found: Vec<Option<DeleteBlock>> = stream::iter(addresses)
        .map(|address| async move {
            let key = ctx.layout.resource_key(address);
            let Some(stored) = ctx.store.get(&key).await? else {
                return Ok(None);
            };
            let record =
                Record::decode(&key, &stored.bytes, &ctx.layout).map_err(SessionError::from)?;
            Ok::<_, RunError>(delete_block(&ctx.layout, &ctx.program, &record))
        })
        .buffered(READS)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().collect())
}

/// Before the claim: say why the plan is refused and give its exit status, when the delete rules stop one of its deletes.
pub async fn refuse(ctx: &Ctx, set: &ChangeSet) -> Result<Option<i32>, RunError> {
    let blocked = blocked(ctx, set).await?;
    if blocked.is_empty() {
        return Ok(None);
    }
    say::plan_refused(DeletesRefused(blocked));
    Ok(Some(EXIT_PLAN_REFUSED))
}
