//! `choudoufu-live records ...`: what the estate holds, its past, and moving state in and out.
//!
//! `ls` and `show` read the current records ([`current`]); `history`, `restore` and `log` read the
//! store's object versions ([`versions`]): [`history`], [`restore`] and [`log`]; `export` and `import` turn the estate into one
//! terraform state document and back ([`transfer`]); `recover` writes a run's recovery file ([`recover`]).

mod address;
mod adopt;
mod claims;
mod command;
mod current;
mod estate;
mod history;
mod log;
mod out;
mod recover;
mod restore;
mod transfer;
mod versions;

pub use command::{RecordsCommand, run};
