//! The delete rules for stock terraform: `run` refuses a planned delete or replace of a resource
//! whose record a newer program wrote, before any provider call (the project's own provider's
//! call log shows none).

use std::process::Output;

use testkit::cdftest::{Cdftest, started};
use testkit::tf::{Records, Root, text, turn};

const OLD: (&str, &str) = ("test", "2026-11-30T00:00:00Z");
const NEW: (&str, &str) = ("newer", "2026-12-01T00:00:00Z");

fn run(root: &Root, cdf: &Cdftest, program: (&str, &str), args: &[&str]) -> Output {
    let mut c = root.run_cmd(args);
    cdf.env(&mut c)
        .env("CHOUDOUFU_PROGRAM_COMMIT", program.0)
        .env("CHOUDOUFU_PROGRAM_TIME", program.1);
    c.output().unwrap()
}

fn must(out: Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn applies_since(cdf: &Cdftest, from: usize) -> usize {
    started(&cdf.calls()[from..], "ApplyResourceChange", None).count()
}

/// A newer program applied `cdftest_thing.a`; an older one's `destroy`, and its replace of `a`,
/// are refused with exit 3 naming both stamps, and the provider is never asked to apply; the
/// newer program's own destroy goes ahead.
#[test]
fn a_newer_programs_resource_is_not_deleted_by_an_older_run() {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = Root::new("cdftest", "deletes", &Records::Local);
    must(run(&root, &cdf, OLD, &["init", "-input=false"]), "init");
    must(
        run(
            &root,
            &cdf,
            OLD,
            &["apply", "-auto-approve", "-input=false"],
        ),
        "the older program's apply",
    );
    // The newer checkout changes a in place: its record now carries the newer stamp.
    must(
        run(
            &root,
            &cdf,
            NEW,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "a_value=v2",
            ],
        ),
        "the newer program's apply",
    );
    assert_eq!(cdf.objects().len(), 2);

    for (what, args) in [
        ("destroy", vec!["destroy", "-auto-approve", "-input=false"]),
        (
            "replace",
            vec![
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "a_name=a2",
            ],
        ),
    ] {
        let before = cdf.calls().len();
        let out = run(&root, &cdf, OLD, &args);
        let said = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{what}: {said}\n{}",
            text(&out.stdout)
        );
        assert!(
            said.contains("refused to delete cdftest_thing.a")
                && said.contains("newer program (newer @ 2026-12-01T00:00:00Z)")
                && said.contains("this run's (test @ 2026-11-30T00:00:00Z)"),
            "{what}: both stamps are named: {said}"
        );
        assert_eq!(
            applies_since(&cdf, before),
            0,
            "{what}: no provider apply: {:#?}",
            &cdf.calls()[before..]
        );
        assert_eq!(cdf.objects().len(), 2, "{what}: nothing deleted");
        assert_eq!(cdf.objects()[0]["name"], "a");
    }

    let before = cdf.calls().len();
    must(
        run(
            &root,
            &cdf,
            NEW,
            &["destroy", "-auto-approve", "-input=false"],
        ),
        "the newer program's destroy",
    );
    assert_eq!(applies_since(&cdf, before), 2);
    assert!(cdf.objects().is_empty());
}
