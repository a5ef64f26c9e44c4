//! The approval between plan and apply, asked as terraform asks it: only `yes` approves.

use std::io::{Read, Write};

use super::command::PlanKind;
use super::terraform::Signals;

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

impl PlanKind {
    fn query(self) -> (&'static str, &'static str, &'static str) {
        match self {
            PlanKind::Apply => (
                "Do you want to perform these actions?",
                "Terraform will perform the actions described above.\n  Only 'yes' will be accepted to approve.",
                "Apply cancelled.",
            ),
            PlanKind::Destroy => (
                "Do you really want to destroy all resources?",
                "Terraform will destroy all your managed infrastructure, as shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.",
                "Destroy cancelled.",
            ),
            PlanKind::RefreshOnly => (
                "Would you like to update the Terraform state to reflect these detected changes?",
                "Terraform will write these changes to the state without modifying any real infrastructure.\n  There is no undo. Only 'yes' will be accepted to confirm.",
                "Apply cancelled.",
            ),
        }
    }
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

/// Ask for approval on stdout and read the answer; print terraform's own words for a refusal.
pub async fn ask(kind: PlanKind, color: bool, signals: &mut Signals) -> Answer {
    let (query, detail, cancelled) = kind.query();
    let (bold, reset) = if color {
        ("\x1b[1m", "\x1b[0m")
    } else {
        ("", "")
    };
    let mut out = std::io::stdout();
    let _ = write!(
        out,
        "\n{bold}{query}{reset}\n  {detail}\n\n  {bold}Enter a value:{reset} "
    );
    let _ = out.flush();
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
    match &answer {
        Answer::Approved => {
            let _ = writeln!(out);
        }
        Answer::Cancelled => {
            let _ = writeln!(out, "\n{cancelled}");
        }
        Answer::Unanswered(why) => {
            let _ = writeln!(out);
            eprintln!("\nError: error asking for approval: {why}\n");
        }
    }
    let _ = out.flush();
    answer
}
