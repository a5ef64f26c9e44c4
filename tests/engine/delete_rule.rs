//! The delete rules of the choudoufu protocol's record writes: a delete they must check whose
//! stored record does not decode is refused by name, and nothing is deleted.

use testkit as common;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::log_writer::LogWriter;
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::RunInfo;
use choudoufu_live::engine::write::Change;
use choudoufu_live::engine::write::records::{self, Kind as RecordKind, Outcome, RecordWrite};
use choudoufu_live::store::{Precondition, WriteOutcome};
use common::{Fixture, Kind};
use serde_json::json;

/// An undeclared resource whose stored record does not decode is not deleted: the rules cannot
/// be checked, so the delete is refused by name and the record stays.
async fn an_unreadable_record_is_not_deleted(kind: Kind) {
    let f = Fixture::new(kind, "unreadable").await;
    let l = Layout::new(EstateName::parse("unreadable").unwrap());
    let run = RunInfo::new(ProgramStamp::default());
    let log = LogWriter::new(f.store.clone(), l.clone(), &run.run_id);
    let address = "terraform_data.x";
    let created = records::write_records(
        &f.store,
        &l,
        &run,
        &log,
        vec![RecordWrite {
            address: address.into(),
            kind: RecordKind::Resource,
            change: Change::Put {
                body: json!({
                    "resource": {"mode": "managed", "type": "terraform_data", "name": "x", "provider": "provider[\"terraform.io/builtin/terraform\"]"},
                    "instance": {"schema_version": 0, "attributes": {"id": "x"}}
                }),
                precondition: Precondition::Absent,
            },
            undeclared: false,
        }],
        4,
    )
    .await
    .unwrap();
    let Outcome::Written(Some(v)) = &created[0].1 else {
        panic!("{kind:?}: {created:?}");
    };
    let key = l.resource_key(address);
    let WriteOutcome::Written(garbled) = f
        .store
        .put(&key, b"not a record", &Precondition::Matches(v.clone()))
        .await
        .unwrap()
    else {
        panic!("{kind:?}: the record could not be garbled");
    };
    let deleted = records::write_records(
        &f.store,
        &l,
        &run,
        &log,
        vec![RecordWrite {
            address: address.into(),
            kind: RecordKind::Resource,
            change: Change::Delete {
                expected: garbled.clone(),
            },
            undeclared: true,
        }],
        4,
    )
    .await
    .unwrap();
    match &deleted[0].1 {
        Outcome::Refused(m) => assert!(
            m.starts_with("refused to delete terraform_data.x: ")
                && m.ends_with("nothing was deleted"),
            "{kind:?}: {m}"
        ),
        other => panic!("{kind:?}: the delete was not refused: {other:?}"),
    }
    let kept = f.store.get(&key).await.unwrap();
    assert_eq!(
        kept.map(|s| s.bytes),
        Some(b"not a record".to_vec()),
        "{kind:?}: nothing was deleted"
    );
}

testkit::per_kind!(
    local => Local, s3 => S3;
    [an_unreadable_record_is_not_deleted]
);
