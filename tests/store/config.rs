//! The live block: where it may stand, and a clear error naming file and line for each mistake.

use std::path::PathBuf;

use choudoufu_live::config::ConfigError;
use choudoufu_live::config::LiveConfig;
use choudoufu_live::store::StoreSettings;
use choudoufu_live::store::local::LocalSettings;

fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn err(files: &[(&str, &str)]) -> String {
    let dir = root(files);
    let e = LiveConfig::load(dir.path()).unwrap_err();
    let text = e.to_string();
    // Nothing is created in the root by a failed load.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), files.len(), "{names:?}");
    text
}

#[test]
fn live_hcl_top_level_block() {
    let dir = root(&[
        (
            "main.tf",
            "terraform {\n  backend \"http\" {}\n}\nresource \"terraform_data\" \"a\" {}\n",
        ),
        (
            "live.hcl",
            "live {\n  estate = \"prod-eu\"\n  record_store \"s3\" {\n    bucket = \"acme\"\n    region = \"eu-west-1\"\n    endpoint = \"http://127.0.0.1:9000\"\n  }\n}\n",
        ),
    ]);
    let c = LiveConfig::load(dir.path()).unwrap();
    assert_eq!(c.estate.as_str(), "prod-eu");
    match c.store {
        StoreSettings::S3(s) => {
            assert_eq!(s.bucket, "acme");
            assert_eq!(s.region.as_deref(), Some("eu-west-1"));
            assert_eq!(s.use_path_style, None);
        }
        other => panic!("{other:?}"),
    }
    assert!(c.source.ends_with("live.hcl:1"), "{}", c.source);
}

#[test]
fn choudoufu_syntax_inside_terraform_block() {
    let dir = root(&[(
        "main.tf",
        "terraform {\n  required_version = \">= 1.0\"\n  live {\n    estate = \"prod\"\n    record_store \"local\" {\n      path = \"recs\"\n    }\n  }\n}\n",
    )]);
    let c = LiveConfig::load(dir.path()).unwrap();
    assert_eq!(c.estate.as_str(), "prod");
    assert_eq!(
        c.store,
        StoreSettings::Local(LocalSettings {
            path: PathBuf::from("recs")
        })
    );
    assert_eq!(c.local_path(dir.path()), Some(dir.path().join("recs")));
    assert!(c.source.ends_with("main.tf:3"), "{}", c.source);
}

#[test]
fn local_store_is_the_default() {
    let dir = root(&[("live.hcl", "live {\n  estate = \"dev\"\n}\n")]);
    let c = LiveConfig::load(dir.path()).unwrap();
    assert_eq!(
        c.store,
        StoreSettings::Local(LocalSettings {
            path: PathBuf::from(".live-records")
        })
    );
}

#[test]
fn no_live_block_says_what_to_add() {
    let text = err(&[("main.tf", "resource \"terraform_data\" \"a\" {}\n")]);
    assert!(
        text.contains("no live block") && text.contains("live.hcl") && text.contains("estate ="),
        "{text}"
    );
}

#[test]
fn both_places_name_both_files() {
    let text = err(&[
        (
            "main.tf",
            "terraform {\n  live {\n    estate = \"a\"\n  }\n}\n",
        ),
        ("live.hcl", "\n\nlive {\n  estate = \"a\"\n}\n"),
    ]);
    assert!(
        text.contains("main.tf:2") && text.contains("live.hcl:3"),
        "{text}"
    );
}

#[test]
fn each_mistake_is_named_with_its_line() {
    let cases: &[(&str, &[&str])] = &[
        (
            "live {\n  record_store \"local\" {}\n}\n",
            &["live.hcl:1", "no `estate`"],
        ),
        (
            "live {\n  estate = \"bad/name\"\n}\n",
            &["live.hcl:2", "invalid estate name"],
        ),
        (
            "live {\n  estate = \"\"\n}\n",
            &["live.hcl:2", "invalid estate name"],
        ),
        (
            "live {\n  estate = var.x\n}\n",
            &["live.hcl:2", "plain string"],
        ),
        (
            "live {\n  estate = \"e\"\n  record_store \"gopher\" {}\n}\n",
            &["live.hcl:3", "unknown record store kind \"gopher\""],
        ),
        (
            "live {\n  estate = \"e\"\n  record_store \"s3\" {\n    region = \"x\"\n  }\n}\n",
            &["live.hcl:3", "no `bucket`"],
        ),
        (
            "live {\n  estate = \"e\"\n  record_store \"local\" {}\n  record_store \"local\" {}\n}\n",
            &["live.hcl:4", "second record_store"],
        ),
        (
            "live {\n  estate = \"e\"\n  record_store \"s3\" {\n    bucket = \"b\"\n    bukket = \"c\"\n  }\n}\n",
            &["live.hcl:5", "no setting `bukket`"],
        ),
        (
            "live {\n  estate = \"e\"\n  colour = \"blue\"\n}\n",
            &["live.hcl:3", "no setting `colour`"],
        ),
        (
            "live {\n  estate = \"e\"\n  record_store {}\n}\n",
            &["live.hcl:3", "one label"],
        ),
        ("live {\n  estate = \"e\"\n", &["live.hcl", "line"]),
    ];
    for (text, wants) in cases {
        let e = err(&[("live.hcl", text)]);
        for want in *wants {
            assert!(e.contains(want), "for {text:?}: wanted {want:?} in {e:?}");
        }
    }
}

#[test]
fn invalid_hcl_in_a_tf_file_names_the_file() {
    let text = err(&[("broken.tf", "resource \"x\" {\n  a = \n")]);
    assert!(
        text.contains("broken.tf") && text.contains("line"),
        "{text}"
    );
    assert!(matches!(
        LiveConfig::load(root(&[("broken.tf", "}")]).path()),
        Err(ConfigError::Parse { .. })
    ));
}

#[test]
fn azurerm_and_gcs_kinds_and_their_settings() {
    let dir = root(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"azurerm\" {\n    storage_account_name = \"acme\"\n    container_name = \"records\"\n    endpoint = \"http://127.0.0.1:10000/devstoreaccount1\"\n  }\n}\n",
    )]);
    match LiveConfig::load(dir.path()).unwrap().store {
        StoreSettings::Azure(a) => {
            assert_eq!(a.storage_account_name.as_deref(), Some("acme"));
            assert_eq!(a.container_name, "records");
            assert!(a.access_key.is_none());
        }
        other => panic!("{other:?}"),
    }
    let dir = root(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"gcs\" {\n    bucket = \"acme\"\n    skip_credentials = true\n  }\n}\n",
    )]);
    match LiveConfig::load(dir.path()).unwrap().store {
        StoreSettings::Gcs(g) => {
            assert_eq!(g.bucket, "acme");
            assert!(g.skip_credentials);
            assert!(g.endpoint.is_none());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn azurerm_and_gcs_mistakes_are_named() {
    let no_container = err(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"azurerm\" {\n    storage_account_name = \"acme\"\n  }\n}\n",
    )]);
    assert!(
        no_container.contains("has no `container_name`"),
        "{no_container}"
    );
    assert!(no_container.contains("live.hcl:3"), "{no_container}");
    let bad_conn = err(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"azurerm\" {\n    container_name = \"c\"\n    connection_string = \"AccountKey=x\"\n  }\n}\n",
    )]);
    assert!(bad_conn.contains("has no AccountName"), "{bad_conn}");
    assert!(bad_conn.contains("live.hcl:5"), "{bad_conn}");
    let s3_setting = err(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"gcs\" {\n    bucket = \"b\"\n    region = \"x\"\n  }\n}\n",
    )]);
    assert!(
        s3_setting.contains("has no setting `region`"),
        "{s3_setting}"
    );
    let no_bucket = err(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"gcs\" {}\n}\n",
    )]);
    assert!(
        no_bucket.contains("record_store \"gcs\" has no `bucket`"),
        "{no_bucket}"
    );
    let unknown = err(&[(
        "live.hcl",
        "live {\n  estate = \"e\"\n  record_store \"kubernetes\" {}\n}\n",
    )]);
    assert!(
        unknown.contains("\"local\", \"s3\", \"azurerm\", \"gcs\""),
        "{unknown}"
    );
}
