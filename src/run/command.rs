//! Terraform's command line as `run` reads it: global options, the subcommand, and where each apply flag goes.
//!
//! `run -- terraform apply ARGS` becomes `terraform plan -out=FILE PLAN-ARGS` and
//! `terraform apply APPLY-ARGS FILE`. Terraform's rules for a saved plan decide the split:
//! `plan` refuses `-auto-approve`; `apply FILE` refuses `-var` for a non-ephemeral variable
//! and ignores `-var-file`, `-target`, `-replace`, `-refresh*` and `-destroy`; ephemeral
//! variables set at plan time must be given again to the apply.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::engine::plan::Plan;

/// A terraform command line: `[global options] SUBCOMMAND [arguments]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfCommand {
    /// The options before the subcommand (e.g. `-chdir=DIR`).
    pub global: Vec<String>,
    /// The subcommand, if any.
    pub subcommand: Option<String>,
    /// Everything after the subcommand.
    pub args: Vec<String>,
}

impl TfCommand {
    /// Split `args` (the words after the program's name).
    pub fn parse(args: &[String]) -> TfCommand {
        match args.iter().position(|a| !a.starts_with('-')) {
            Some(i) => TfCommand {
                global: args[..i].to_vec(),
                subcommand: Some(args[i].clone()),
                args: args[i + 1..].to_vec(),
            },
            None => TfCommand {
                global: args.to_vec(),
                subcommand: None,
                args: Vec::new(),
            },
        }
    }

    /// The subcommand as a string slice.
    pub fn sub(&self) -> Option<&str> {
        self.subcommand.as_deref()
    }

    /// Terraform's working folder: `-chdir=DIR`, or the current folder.
    pub fn dir(&self) -> PathBuf {
        self.global
            .iter()
            .find_map(|a| {
                a.strip_prefix("-chdir=")
                    .or_else(|| a.strip_prefix("--chdir="))
            })
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// A flag's name (leading dashes off) and its inline value (after `=`).
fn flag(arg: &str) -> Option<(&str, Option<&str>)> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    if body.is_empty() {
        return None;
    }
    Some(match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    })
}

/// Flags of plan and apply that take a value (as `-flag=value` or `-flag value`).
const VALUE_FLAGS: &[&str] = &[
    "var",
    "var-file",
    "target",
    "replace",
    "lock-timeout",
    "parallelism",
    "state",
    "state-out",
    "backup",
    "out",
    "generate-config-out",
];

/// Flags valid on both `plan` and `apply FILE`, with the same meaning.
const BOTH: &[&str] = &[
    "lock",
    "lock-timeout",
    "parallelism",
    "input",
    "no-color",
    "json",
    "compact-warnings",
    "state",
    "state-out",
    "backup",
];

/// Flags `apply` does not take: terraform refuses them itself.
const NOT_APPLY: &[&str] = &["detailed-exitcode", "out", "generate-config-out"];

/// One `-var` or `-var-file` given to the plan, kept to forward the ephemeral ones to the apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VarArg {
    /// `-var NAME=VALUE` (the text after `-var`).
    Var(String),
    /// `-var-file=PATH`.
    File(String),
}

impl VarArg {
    fn to_arg(&self) -> String {
        match self {
            VarArg::Var(v) => format!("-var={v}"),
            VarArg::File(f) => format!("-var-file={f}"),
        }
    }
}

/// What the approval asks, as terraform asks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanKind {
    /// A normal apply.
    Apply,
    /// `destroy` or `apply -destroy`.
    Destroy,
    /// `apply -refresh-only`.
    RefreshOnly,
}

/// An `apply` or `destroy` without a plan file, split into its plan and apply steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplySplit {
    /// Arguments for `terraform plan -out=FILE` (without `-out`).
    pub plan: Vec<String>,
    /// Arguments for `terraform apply FILE` (without FILE and without the ephemeral variables).
    pub apply: Vec<String>,
    /// Every `-var` and `-var-file`, in order.
    pub vars: Vec<VarArg>,
    /// `-auto-approve` was given.
    pub auto_approve: bool,
    /// What kind of plan it is.
    pub kind: PlanKind,
    /// `-no-color` was given.
    pub no_color: bool,
}

/// What `run` does with an apply-like command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyCommand {
    /// Plan, approve, claim, then apply the plan.
    Planned(ApplySplit),
    /// `apply [flags] FILE`: claim, check the stamp, apply (its flags as split for a later reconcile).
    Saved(PathBuf, ApplySplit),
    /// Run as given: terraform refuses it, or prints help, before touching any state.
    AsGiven,
}

/// Read `apply`/`destroy` arguments.
pub fn apply_command(cmd: &TfCommand) -> ApplyCommand {
    let destroy_cmd = cmd.sub() == Some("destroy");
    let mut split = ApplySplit {
        plan: Vec::new(),
        apply: Vec::new(),
        vars: Vec::new(),
        auto_approve: false,
        kind: if destroy_cmd {
            PlanKind::Destroy
        } else {
            PlanKind::Apply
        },
        no_color: false,
    };
    let mut json = false;
    let mut positional = Vec::new();
    let mut it = cmd.args.iter();
    while let Some(arg) = it.next() {
        let Some((name, inline)) = flag(arg) else {
            positional.push(arg.clone());
            continue;
        };
        if matches!(name, "help" | "h") || NOT_APPLY.contains(&name) {
            return ApplyCommand::AsGiven;
        }
        // Every flag as `-name=value` or `-name`: the value of `-name value` joins it.
        let value = match inline {
            Some(v) => Some(v.to_string()),
            None if VALUE_FLAGS.contains(&name) => match it.next() {
                Some(v) => Some(v.clone()),
                None => return ApplyCommand::AsGiven,
            },
            None => None,
        };
        let whole = match &value {
            Some(v) => format!("-{name}={v}"),
            None => format!("-{name}"),
        };
        let on = || value.as_deref().is_none_or(|v| v != "false");
        match name {
            "auto-approve" => split.auto_approve = on(),
            "destroy" => {
                if on() {
                    split.kind = PlanKind::Destroy;
                }
                if !destroy_cmd {
                    split.plan.push(whole);
                }
            }
            "refresh-only" => {
                if on() && split.kind == PlanKind::Apply {
                    split.kind = PlanKind::RefreshOnly;
                }
                split.plan.push(whole);
            }
            "var" => {
                split.vars.push(VarArg::Var(value.unwrap_or_default()));
                split.plan.push(whole);
            }
            "var-file" => {
                split.vars.push(VarArg::File(value.unwrap_or_default()));
                split.plan.push(whole);
            }
            name if BOTH.contains(&name) => {
                if name == "json" {
                    json = on();
                }
                if name == "no-color" {
                    split.no_color = on();
                }
                split.plan.push(whole.clone());
                split.apply.push(whole);
            }
            // -target, -replace, -refresh and any flag this version does not know: they shape the plan.
            _ => split.plan.push(whole),
        }
    }
    if destroy_cmd {
        split.plan.insert(0, "-destroy".into());
    }
    match positional.as_slice() {
        [] if json && !split.auto_approve => ApplyCommand::AsGiven,
        [] => ApplyCommand::Planned(split),
        [file] if !destroy_cmd => ApplyCommand::Saved(PathBuf::from(file), split),
        _ => ApplyCommand::AsGiven,
    }
}

/// Whether `cmd` is `state push` without `-force` (on its command line, or in `TF_CLI_ARGS` or `TF_CLI_ARGS_state`).
pub fn unforced_push(cmd: &TfCommand) -> bool {
    if cmd.sub() != Some("state") || cmd.args.first().map(String::as_str) != Some("push") {
        return false;
    }
    let forced = |a: &str| matches!(a.trim_start_matches('-'), "force" | "force=true");
    let from_env: Vec<String> = ["TF_CLI_ARGS", "TF_CLI_ARGS_state"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    !cmd.args.iter().chain(&from_env).any(|a| forced(a))
}

/// The `plan -out=FILE` of a `plan` command, if it saves one.
pub fn saved_plan_out(cmd: &TfCommand) -> Option<PathBuf> {
    if cmd.sub() != Some("plan") {
        return None;
    }
    let mut it = cmd.args.iter();
    while let Some(a) = it.next() {
        match flag(a) {
            Some(("out", Some(f))) => return Some(PathBuf::from(f)),
            Some(("out", None)) => return it.next().map(PathBuf::from),
            _ => {}
        }
    }
    None
}

/// Flags of the user's plan a cone's first plan leaves out: it writes its own file, says nothing, asks nothing and takes no lock.
const NOT_IN_FIRST_PLAN: &[&str] = &[
    "out",
    "detailed-exitcode",
    "json",
    "input",
    "lock",
    "lock-timeout",
    "no-color",
    "compact-warnings",
];

/// The arguments of a cone plan's first plan, without a refresh and writing to `out`, for the plan `args` (`plan ...`); none when `args` is no plan a cone serves: another command, terraform's own `-refresh=false` or `-refresh-only`, `-generate-config-out`, help, or a word that is no flag.
pub fn cone_plan_args(args: &[String], out: &Path) -> Option<Vec<String>> {
    let (sub, rest) = args.split_first()?;
    if sub != "plan" {
        return None;
    }
    let mut first = vec![
        "plan".to_string(),
        "-refresh=false".to_string(),
        "-input=false".to_string(),
        "-lock=false".to_string(),
        format!("-out={}", out.display()),
    ];
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = flag(arg)?;
        let value = match inline {
            Some(v) => Some(v.to_string()),
            None if VALUE_FLAGS.contains(&name) => Some(it.next()?.clone()),
            None => None,
        };
        let on = value.as_deref().is_none_or(|v| v != "false");
        match name {
            "refresh" if !on => return None,
            "refresh-only" if on => return None,
            "generate-config-out" | "help" | "h" => return None,
            "refresh" | "refresh-only" => {}
            name if NOT_IN_FIRST_PLAN.contains(&name) => {}
            name => first.push(match value {
                Some(v) => format!("-{name}={v}"),
                None => format!("-{name}"),
            }),
        }
    }
    Some(first)
}

impl ApplySplit {
    /// The arguments of `terraform plan` for this apply, writing the plan to `out`.
    pub fn plan_args(&self, out: &Path) -> Vec<String> {
        let mut args = vec!["plan".to_string(), format!("-out={}", out.display())];
        args.extend(self.plan.iter().cloned());
        args
    }

    /// The arguments of `terraform apply FILE`: the flags both steps take, and the ephemeral variables set at plan time.
    pub fn apply_args(&self, ephemeral: &BTreeSet<String>, dir: &Path, plan: &Path) -> Vec<String> {
        let mut args = vec!["apply".to_string()];
        args.extend(self.apply_flags(ephemeral, dir));
        args.push(plan.display().to_string());
        args
    }

    /// The flags of `terraform apply FILE`: those both steps take, and the ephemeral variables set at plan time.
    pub fn apply_flags(&self, ephemeral: &BTreeSet<String>, dir: &Path) -> Vec<String> {
        let mut args = self.apply.clone();
        for v in &self.vars {
            let forward = match v {
                VarArg::Var(text) => text
                    .split_once('=')
                    .is_some_and(|(name, _)| ephemeral.contains(name.trim())),
                VarArg::File(path) => file_sets_any(&dir.join(path), ephemeral),
            };
            if forward {
                args.push(v.to_arg());
            }
        }
        args
    }

    /// `terraform import` of `address` as `id`, with the plan's variables (binding a marked object).
    pub fn import_args(&self, address: &str, id: &str) -> Vec<String> {
        let mut args = vec!["import".to_string(), "-input=false".to_string()];
        if self.no_color {
            args.push("-no-color".into());
        }
        args.extend(self.vars.iter().map(VarArg::to_arg));
        args.push(address.to_string());
        args.push(id.to_string());
        args
    }

    /// `terraform taint` of `address` (a bound object whose create never returned).
    pub fn taint_args(&self, address: &str) -> Vec<String> {
        let mut args = vec!["taint".to_string()];
        if self.no_color {
            args.push("-no-color".into());
        }
        args.push(address.to_string());
        args
    }

    /// The flags of the plan that reconciles outputs: the same variables, from the records as they are, nothing replaced or targeted.
    pub fn reconcile_flags(&self) -> Vec<String> {
        let mut args = vec!["-refresh=false".to_string()];
        for a in &self.plan {
            let name = flag(a).map(|(n, _)| n).unwrap_or_default();
            if !matches!(
                name,
                "target" | "replace" | "destroy" | "refresh" | "refresh-only"
            ) {
                args.push(a.clone());
            }
        }
        args
    }
}

/// Whether the variable file at `path` assigns any of `names` (an unreadable file counts: terraform judges it).
fn file_sets_any(path: &Path, names: &BTreeSet<String>) -> bool {
    if names.is_empty() {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return true;
    };
    let keys: Vec<String> = if path.extension().is_some_and(|e| e == "json") {
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            _ => return true,
        }
    } else {
        match hcl::edit::parser::parse_body(&text) {
            Ok(body) => body
                .attributes()
                .map(|a| a.key.as_str().to_string())
                .collect(),
            Err(_) => return true,
        }
    };
    keys.iter().any(|k| names.contains(k))
}

/// The ephemeral input variables of the root in `dir` (`ephemeral = true` in its `.tf` and `.tf.json` files).
///
/// `show -json` does not say which variables are ephemeral; a variable without a default that
/// the plan declares but does not store is one too.
pub fn ephemeral_variables(dir: &Path, plan: &Plan) -> BTreeSet<String> {
    let mut out = ephemeral_in_files(dir);
    out.extend(
        plan.configuration
            .root_module
            .variables
            .iter()
            .filter(|(name, v)| v.default.is_none() && !plan.variables.contains_key(*name))
            .map(|(name, _)| name.clone()),
    );
    out
}

/// The input variables the root's `.tf` and `.tf.json` files in `dir` declare ephemeral (`ephemeral = true`).
pub fn ephemeral_in_files(dir: &Path) -> BTreeSet<String> {
    use hcl::edit::expr::Expression;
    use hcl::edit::structure::BlockLabel;
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if name.ends_with(".tf.json") {
            if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
                for (var, body) in json["variable"].as_object().into_iter().flatten() {
                    if body["ephemeral"] == serde_json::Value::Bool(true) {
                        out.insert(var.clone());
                    }
                }
            }
        } else if name.ends_with(".tf")
            && let Ok(body) = hcl::edit::parser::parse_body(&text)
        {
            for block in body.blocks().filter(|b| b.ident.as_str() == "variable") {
                let Some(label) = block.labels.first() else {
                    continue;
                };
                let var = match label {
                    BlockLabel::String(s) => s.value().to_string(),
                    BlockLabel::Ident(i) => i.as_str().to_string(),
                };
                let ephemeral = block.body.attributes().any(|a| {
                    a.key.as_str() == "ephemeral"
                        && matches!(&a.value, Expression::Bool(b) if *b.value())
                });
                if ephemeral {
                    out.insert(var);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &str) -> TfCommand {
        TfCommand::parse(
            &words
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>(),
        )
    }

    fn planned(words: &str) -> ApplySplit {
        match apply_command(&cmd(words)) {
            ApplyCommand::Planned(s) => s,
            other => panic!("{words}: {other:?}"),
        }
    }

    #[test]
    fn a_push_is_guarded_unless_forced() {
        assert!(unforced_push(&cmd("state push old.tfstate")));
        assert!(unforced_push(&cmd("-chdir=x state push -")));
        assert!(!unforced_push(&cmd("state push -force old.tfstate")));
        assert!(!unforced_push(&cmd("state push --force=true old.tfstate")));
        assert!(!unforced_push(&cmd("state pull")));
        assert!(!unforced_push(&cmd("apply -auto-approve")));
    }

    #[test]
    fn each_flag_goes_to_the_step_that_takes_it() {
        let s = planned(
            "-chdir=x apply -auto-approve -var a=1 -var-file=f.tfvars -target=t.a -replace t.b -refresh=false -parallelism 3 -no-color -json -compact-warnings -input=false -lock=false -lock-timeout=5s",
        );
        assert!(s.auto_approve);
        assert_eq!(s.kind, PlanKind::Apply);
        assert_eq!(
            s.plan,
            [
                "-var=a=1",
                "-var-file=f.tfvars",
                "-target=t.a",
                "-replace=t.b",
                "-refresh=false",
                "-parallelism=3",
                "-no-color",
                "-json",
                "-compact-warnings",
                "-input=false",
                "-lock=false",
                "-lock-timeout=5s"
            ]
        );
        assert_eq!(
            s.apply,
            [
                "-parallelism=3",
                "-no-color",
                "-json",
                "-compact-warnings",
                "-input=false",
                "-lock=false",
                "-lock-timeout=5s"
            ]
        );
        assert_eq!(
            s.vars,
            [VarArg::Var("a=1".into()), VarArg::File("f.tfvars".into())]
        );
        assert_eq!(cmd("-chdir=x apply").dir(), PathBuf::from("x"));
    }

    #[test]
    fn destroys_and_refresh_only_plans() {
        let d = planned("destroy -target=t.a");
        assert_eq!(d.kind, PlanKind::Destroy);
        assert_eq!(d.plan, ["-destroy", "-target=t.a"]);
        let d = planned("apply -destroy");
        assert_eq!(d.kind, PlanKind::Destroy);
        assert_eq!(d.plan, ["-destroy"]);
        assert_eq!(planned("apply -refresh-only").kind, PlanKind::RefreshOnly);
    }

    #[test]
    fn saved_plans_help_and_refused_flags() {
        for saved in ["apply -input=false p.tfplan", "apply -var x=1 p.tfplan"] {
            assert!(
                matches!(apply_command(&cmd(saved)), ApplyCommand::Saved(f, _) if f == Path::new("p.tfplan")),
                "{saved}"
            );
        }
        for refused in [
            "apply -help",
            "apply -json",
            "apply -detailed-exitcode",
            "apply a b",
            "apply -var",
        ] {
            assert_eq!(
                apply_command(&cmd(refused)),
                ApplyCommand::AsGiven,
                "{refused}"
            );
        }
        assert!(matches!(
            apply_command(&cmd("apply -json -auto-approve")),
            ApplyCommand::Planned(_)
        ));
    }

    #[test]
    fn only_ephemeral_variables_reach_the_apply() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("e.tfvars"), "tok = \"s\"\n").unwrap();
        std::fs::write(dir.path().join("n.tfvars"), "x = \"d\"\n").unwrap();
        std::fs::write(dir.path().join("e.tfvars.json"), "{\"tok\": \"s\"}").unwrap();
        let s = planned(
            "apply -var tok=a -var x=b -var-file=e.tfvars -var-file=n.tfvars -var-file=e.tfvars.json",
        );
        let eph: BTreeSet<String> = ["tok".to_string()].into();
        assert_eq!(
            s.apply_args(&eph, dir.path(), Path::new("/p")),
            [
                "apply",
                "-var=tok=a",
                "-var-file=e.tfvars",
                "-var-file=e.tfvars.json",
                "/p"
            ]
        );
        assert_eq!(
            s.apply_args(&BTreeSet::new(), dir.path(), Path::new("/p")),
            ["apply", "/p"]
        );
        let json = Plan::from_value(serde_json::json!({
            "variables": {"x": {"value": "d"}, "dflt": {"value": "none"}},
            "configuration": {"root_module": {"variables": {"tok": {}, "x": {"default": "d"}, "dflt": {"default": "none"}}}}
        }))
        .unwrap();
        assert_eq!(ephemeral_variables(dir.path(), &json), eph);
        std::fs::write(
            dir.path().join("v.tf"),
            "variable \"dflt\" {\n  default   = \"none\"\n  ephemeral = true\n}\nvariable \"x\" {\n  ephemeral = false\n}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("w.tf.json"),
            "{\"variable\": {\"j\": {\"ephemeral\": true}}}",
        )
        .unwrap();
        assert_eq!(
            ephemeral_variables(dir.path(), &json),
            ["dflt", "j", "tok"].map(String::from).into()
        );
    }

    #[test]
    fn a_cone_starts_with_the_same_plan_without_a_refresh() {
        let words = |w: &str| w.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let out = Path::new("/tmp/p/cone.tfplan");
        assert_eq!(
            cone_plan_args(
                &words("plan -out=x.tfplan -var a=1 -target t.a -detailed-exitcode -no-color -lock=true -destroy -refresh=true"),
                out
            )
            .unwrap(),
            [
                "plan",
                "-refresh=false",
                "-input=false",
                "-lock=false",
                "-out=/tmp/p/cone.tfplan",
                "-var=a=1",
                "-target=t.a",
                "-destroy"
            ]
        );
        // Terraform's own refresh flags keep their meaning: no cone.
        for own in [
            "plan -refresh=false",
            "plan -refresh-only",
            "plan -generate-config-out=g.tf",
            "plan -help",
            "plan somedir",
            "apply",
            "plan -var",
        ] {
            assert!(cone_plan_args(&words(own), out).is_none(), "{own}");
        }
        assert!(cone_plan_args(&words("plan -refresh-only=false"), out).is_some());
    }

    #[test]
    fn the_reconciling_plan_keeps_variables_only() {
        let s = planned("apply -var a=1 -target=t.a -replace=t.b -refresh-only -no-color");
        assert_eq!(
            s.reconcile_flags(),
            ["-refresh=false", "-var=a=1", "-no-color"]
        );
    }
}
