//! A cone plan saved with `-out` (`run --refresh=cone -- terraform plan -out=FILE`) is stamped and checked like any other: applied after another run moved one of its changes, it is refused (exit 3) and nothing is applied. The project's own provider (cdftest), so it costs little.

use std::process::Output;

use testkit::cdftest::Cdftest;
use testkit::tf::{Records, Root, must, text, turn};

fn run(root: &Root, cdf: &Cdftest, opts: &[&str], args: &[&str]) -> Output {
    cdf.run_cmd(root, opts, args).output().unwrap()
}

#[test]
fn a_saved_cone_plan_is_stamped_and_refused_once_its_change_moved() {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = Root::new("cdftest", "cone-saved", &Records::Local);
    must(run(&root, &cdf, &[], &["init", "-input=false"]), "init");
    must(
        run(
            &root,
            &cdf,
            &[],
            &["apply", "-auto-approve", "-input=false"],
        ),
        "apply",
    );
    let plan = must(
        run(
            &root,
            &cdf,
            &["--refresh=cone"],
            &[
                "plan",
                "-input=false",
                "-out=p.tfplan",
                "-var",
                "b_value=v2",
            ],
        ),
        "cone plan",
    );
    let err = text(&plan.stderr);
    assert!(err.contains("not refreshed (cone)"), "{err}");
    assert!(
        root.path().join("p.tfplan.live-stamp").is_file(),
        "the saved cone plan has no stamp: {err}"
    );
    // Another run changes b, the saved plan's own change.
    must(
        run(
            &root,
            &cdf,
            &[],
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "b_value=v3",
            ],
        ),
        "the other apply",
    );
    let applied = run(&root, &cdf, &[], &["apply", "-input=false", "p.tfplan"]);
    let err = text(&applied.stderr);
    assert_eq!(applied.status.code(), Some(3), "{err}");
    assert!(err.contains("cdftest_thing.b"), "{err}");
    // Nothing was applied: b holds the other run's value.
    let b = root.record_at("cdftest_thing.b").unwrap();
    assert!(
        b["instance"]["attributes"]["value"]
            .as_str()
            .is_some_and(|v| v.starts_with("v3-")),
        "{b}"
    );
}
