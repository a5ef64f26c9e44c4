//! What a command reports to the user when it fails, and the exit status it gives.

/// Exit status for an error before or outside terraform (config, store, input).
pub const EXIT_ERROR: i32 = 1;

/// Any error a command reports to the user.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;
