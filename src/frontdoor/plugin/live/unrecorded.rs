//! `ListUnrecorded`: the marked live objects of the estate that no record names, listed with
//! each provider configuration the request gives (the records' side is
//! [`engine::markers::unrecorded`](crate::engine::markers::unrecorded)).

use std::collections::BTreeSet;

use tonic::Status;

use super::validate;
use super::wire::{diag, invalid, live_object, provider_config};
use crate::cloud::aws::markers as markers_aws;
use crate::engine::layout::Layout;
use crate::engine::markers::unrecorded::{Recorded, RecordedResource};
use crate::engine::markers::{self, Family};
use crate::engine::write::records::{self as record_writes, Kind};
use crate::frontdoor::plugin::proto::live as pb;
use crate::store::DynStore;

/// The answer to `req`: each unrecorded object once, a warning for each, and a diagnostic for
/// each provider configuration whose records were not checked or whose listing failed.
pub(super) async fn list(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    req: pb::ListUnrecordedRequest,
) -> Result<pb::ListUnrecordedResponse, Status> {
    if let Err(e) = validate::list_unrecorded(&req) {
        return Ok(pb::ListUnrecordedResponse {
            objects: vec![],
            diagnostics: invalid(&e),
        });
    }
    let estate = layout.estate().as_str().to_string();
    let entries = record_writes::read_entries(store, layout, parallel)
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
    // Resource records of the AWS family, by provider configuration address.
    let resources = entries
        .iter()
        .filter(|e| e.kind == Kind::Resource)
        .filter_map(|e| {
            let res = &e.content["resource"];
            Some(RecordedResource {
                address: &e.address,
                provider: res["provider"].as_str()?,
                type_name: res["type"].as_str()?,
            })
        });
    let recorded = Recorded::of_family(Family::Aws, resources);
    let mut diagnostics = Vec::new();
    let mut objects = Vec::new();
    let given: BTreeSet<&str> = req.providers.iter().map(|p| p.address.as_str()).collect();
    for (provider, records) in recorded.unlisted(&given) {
        diagnostics.push(diag(
            pb::diagnostic::Severity::Warning,
            "No marker listing",
            &markers_aws::ListingError::NoConfiguration {
                what: format!(
                    "{records} record(s) under {provider} were not checked for unrecorded objects"
                ),
            }
            .to_string(),
            "",
        ));
    }
    for p in &req.providers {
        // Types come from this provider's records; names from every record of the estate,
        // so an object whose record sits under another provider configuration is not reported.
        let types = recorded.types_under(&p.address, &req.resource_types);
        if types.is_empty() {
            continue;
        }
        let lister = match markers_aws::AwsLister::from_json(&provider_config(&p.config_json)).await
        {
            Ok(l) => l,
            Err(e) => {
                diagnostics.push(diag(
                    pb::diagnostic::Severity::Error,
                    "No marker listing",
                    &format!("{}: {e}", p.address),
                    "",
                ));
                continue;
            }
        };
        match lister.list_marked(&estate, &types).await {
            Ok(found) => {
                for o in found
                    .into_iter()
                    .filter(|o| recorded.unrecorded(o.address()))
                {
                    if objects.iter().any(|x: &pb::LiveObject| x.id == o.arn) {
                        continue;
                    }
                    diagnostics.push(unrecorded_warning(&estate, &o));
                    objects.push(live_object(o));
                }
            }
            Err(e) => diagnostics.push(diag(
                pb::diagnostic::Severity::Error,
                "Marker listing failed",
                &format!("{}: {e}", p.address),
                "",
            )),
        }
    }
    Ok(pb::ListUnrecordedResponse {
        objects,
        diagnostics,
    })
}

/// The warning about one unrecorded object of `estate`.
fn unrecorded_warning(estate: &str, o: &markers_aws::LiveObject) -> pb::Diagnostic {
    diag(
        pb::diagnostic::Severity::Warning,
        "Unrecorded marked object",
        &format!(
            "{} carries {}={:?} and {}={:?}, but no record of the estate names that address; it was not deleted. Import it (terraform import), or delete it by hand if nothing should own it.",
            o.arn,
            markers::ESTATE_TAG,
            estate,
            markers::ADDRESS_TAG,
            o.address().unwrap_or("(none)")
        ),
        o.address().unwrap_or_default(),
    )
}
