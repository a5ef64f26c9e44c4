//! The http backend settings `run` gives terraform itself.

/// The http backend settings `run` gives terraform itself; set anywhere else, they would win over its own.
pub(super) const BACKEND_SETTINGS_RUN_SETS_LIST: [&str; 5] = [
    "address",
    "lock_address",
    "unlock_address",
    "username",
    "password",
];
/// The same, as the error messages list them.
pub(super) const BACKEND_SETTINGS_RUN_SETS: &str =
    "address, lock_address, unlock_address, username or password";
