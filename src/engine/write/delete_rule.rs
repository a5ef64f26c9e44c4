//! The delete rules, for every door: a run does not delete a newer program's resource, nor one
//! another estate's live marker claims, nor one whose stored record it cannot read.

use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::markers::owner_of;
use crate::engine::program::ProgramStamp;
use crate::engine::record::{CorruptRecord, Record};

/// Why the delete rules stop a delete of a stored resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteBlock {
    /// A newer program than the deleting run's wrote the record.
    NewerProgram {
        /// The instance address.
        address: String,
        /// The stamp of the record's writer.
        stored: ProgramStamp,
        /// The deleting run's stamp.
        run: ProgramStamp,
    },
    /// The record's live marker names another estate than the deleting run's.
    OtherEstate {
        /// The instance address.
        address: String,
        /// The estate its marker names.
        owner: String,
        /// The deleting run's estate.
        estate: String,
    },
}

/// The delete rules, for every door: a run of `program` in `layout`'s estate may delete `stored`
/// unless a newer program wrote it or its live marker names another estate.
pub fn delete_block(
    layout: &Layout,
    program: &ProgramStamp,
    stored: &Record,
) -> Option<DeleteBlock> {
    if cut(Mechanism::DeleteRule) {
        return None;
    }
    if stored.program.is_newer_than(program) {
        return Some(DeleteBlock::NewerProgram {
            address: stored.address().to_string(),
            stored: stored.program.clone(),
            run: program.clone(),
        });
    }
    if let Some(owner) = stored.instance().and_then(owner_of)
        && owner != layout.estate().as_str()
    {
        return Some(DeleteBlock::OtherEstate {
            address: stored.address().to_string(),
            owner,
            estate: layout.estate().to_string(),
        });
    }
    None
}

/// A delete the rules must check whose stored record does not decode: its writer and marker are
/// unknown, so it is refused and nothing is deleted.
#[derive(Clone, Debug, Error)]
#[error(
    "refused to delete {address}: its stored record cannot be read ({}), so the delete rules cannot be checked; nothing was deleted",
    .cause.reason
)]
pub struct UnreadableDelete {
    /// The instance address.
    pub address: String,
    /// Why the record does not decode.
    #[source]
    pub cause: CorruptRecord,
}

/// Whether the delete rules let a run of `program` delete the record stored at `key` as `bytes`:
/// `Ok(None)` they do, `Ok(Some(block))` they stop it, an error when the record does not decode.
pub fn check_delete(
    layout: &Layout,
    program: &ProgramStamp,
    address: &str,
    key: &str,
    bytes: &[u8],
) -> Result<Option<DeleteBlock>, UnreadableDelete> {
    if cut(Mechanism::DeleteRule) {
        return Ok(None);
    }
    match Record::decode(key, bytes, layout) {
        Ok(stored) => Ok(delete_block(layout, program, &stored)),
        Err(cause) => Err(UnreadableDelete {
            address: address.to_string(),
            cause,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::EstateName;

    #[test]
    fn a_stored_record_that_does_not_decode_refuses_the_delete() {
        let layout = Layout::new(EstateName::parse("e").unwrap());
        let key = layout.resource_key("terraform_data.a");
        let refused = check_delete(
            &layout,
            &ProgramStamp::default(),
            "terraform_data.a",
            &key,
            b"not a record",
        )
        .unwrap_err();
        assert_eq!(refused.address, "terraform_data.a");
        let text = refused.to_string();
        assert!(
            text.starts_with("refused to delete terraform_data.a: ")
                && text.ends_with("nothing was deleted"),
            "{text}"
        );
    }
}
