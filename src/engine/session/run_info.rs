//! What a run is: its ID and the program it applies.

use crate::engine::program::ProgramStamp;

/// What a run is: its ID and the program it applies.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// A unique ID for this run.
    pub run_id: String,
    /// The program stamp of the configuration.
    pub program: ProgramStamp,
}

impl RunInfo {
    /// A new run with a fresh ID.
    pub fn new(program: ProgramStamp) -> Self {
        RunInfo {
            run_id: uuid::Uuid::new_v4().to_string(),
            program,
        }
    }
}
