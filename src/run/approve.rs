//! The approval between plan and apply, asked as terraform asks it: only `yes` approves.

use std::io::{IsTerminal, Read};

use super::command::PlanKind;
use super::say::{self, Answered};
use super::signals::Signals;

/// What the user answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `yes`.
    Approved,
    /// Anything else: nothing is applied.
    Cancelled,
    /// Input ended, or could not be read, before an answer.
    Unanswered(String),
}

/// One line from stdin, read byte by byte so nothing after it is taken from terraform.
fn read_line() -> Result<Option<String>, std::io::Error> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut byte) {
            Ok(0) if line.is_empty() => return Ok(None),
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(Some(String::from_utf8_lossy(&line).trim().to_string()))
}

/// Ask for approval on stdout (bold only on a terminal and without `no_color`, see [`crate::logging::colour`]) and read the answer (a signal ends the wait); print terraform's own words for a refusal.
pub async fn ask(kind: PlanKind, no_color: bool, signals: &Signals) -> Answer {
    let colour = !no_color && crate::logging::colour(std::io::stdout().is_terminal());
    say::ask(kind, colour);
    let read = tokio::task::spawn_blocking(read_line);
    let answer = tokio::select! {
        r = read => match r {
            Ok(Ok(Some(a))) if a == "yes" => Answer::Approved,
            Ok(Ok(Some(_))) => Answer::Cancelled,
            Ok(Ok(None)) => Answer::Unanswered("EOF".into()),
            Ok(Err(e)) => Answer::Unanswered(e.to_string()),
            Err(e) => Answer::Unanswered(e.to_string()),
        },
        _ = signals.stop() => Answer::Unanswered("interrupted".into()),
    };
    say::answered(
        kind,
        match &answer {
            Answer::Approved => Answered::Yes,
            Answer::Cancelled => Answered::No,
            Answer::Unanswered(why) => Answered::Unanswered(why),
        },
    );
    answer
}
