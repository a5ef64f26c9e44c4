//! `records claims`: the claims runs hold on the estate's resources now, and whether each run counts as alive.

use std::path::Path;
use std::time::Duration;

use super::estate::Estate;
use super::out::{outln, table};
use crate::cli::error::CliError;
use crate::engine::claims::{self, MISSED_BEATS};

/// `records claims`: every claim with its run, what the run is doing since when, and whether it is alive or gone.
pub(super) async fn claims(root: &Path) -> Result<i32, CliError> {
    let estate = Estate::open(root).await?;
    let marks = claims::read_marks(&estate.store, &estate.layout).await?;
    outln!(
        "claims in estate {} ({}): {}",
        estate.layout.estate(),
        estate.store.describe(),
        marks.len()
    );
    if marks.is_empty() {
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = marks
        .iter()
        .map(|(mark, alive)| {
            let window = Duration::from_millis(mark.heartbeat_millis) * MISSED_BEATS;
            let state = match (*alive, mark.heartbeat_millis) {
                (true, 0) => "live".to_string(),
                (true, _) => format!(
                    "live (gone once its heartbeat is {} old)",
                    humantime::format_duration(window)
                ),
                (false, _) => "gone: the next run that needs it takes it over".to_string(),
            };
            vec![
                mark.address.clone(),
                mark.operation.to_string(),
                mark.run_id.clone(),
                mark.since.clone(),
                state,
            ]
        })
        .collect();
    table(&["ADDRESS", "OPERATION", "RUN", "SINCE", "STATE"], &rows)?;
    Ok(0)
}
