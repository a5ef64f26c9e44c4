//! The records commands' standard output, written through one handle: a reader that closed the pipe (`records ls | head -1`) ends the command quietly.

use std::fmt;
use std::io::{self, Write};

use crate::cli::error::CliError;

/// Print one line on stdout; a write error (a closed pipe among them) returns from the calling function.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::records::out::line(format_args!($($arg)*))?
    };
}
pub(super) use outln;

/// Write one line to stdout.
pub(super) fn line(text: fmt::Arguments<'_>) -> Result<(), io::Error> {
    let mut out = io::stdout().lock();
    out.write_fmt(text)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Whether `e` is stdout closed by its reader (`| head`): the reader has what it wanted, so the command ends quietly.
pub(super) fn closed(e: &CliError) -> bool {
    if crate::cut::cut(crate::cut::Mechanism::QuietPipe) {
        return false;
    }
    e.downcast_ref::<io::Error>()
        .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
}

/// Print rows as aligned columns under `header`.
pub(super) fn table(header: &[&str], rows: &[Vec<String>]) -> Result<(), std::io::Error> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:w$}  "));
            }
        }
        outln!("{}", out.trim_end());
        Ok::<(), std::io::Error>(())
    };
    line(header.to_vec())?;
    for row in rows {
        line(row.iter().map(String::as_str).collect())?;
    }
    Ok(())
}
