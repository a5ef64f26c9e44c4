//! The names the binary answers to as a shim, and the variable naming each one's real program.

use std::ffi::OsStr;
use std::path::Path;

/// A program the shim stands in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShimName {
    /// `terraform`.
    Terraform,
    /// `tofu`.
    Tofu,
}

impl ShimName {
    /// Both names, in the order `shim DIR` writes them.
    pub const ALL: [ShimName; 2] = [ShimName::Terraform, ShimName::Tofu];

    /// The program's file name.
    pub fn program(self) -> &'static str {
        match self {
            ShimName::Terraform => "terraform",
            ShimName::Tofu => "tofu",
        }
    }

    /// The variable that names the real program explicitly.
    pub fn env(self) -> &'static str {
        match self {
            ShimName::Terraform => "CHOUDOUFU_TERRAFORM",
            ShimName::Tofu => "CHOUDOUFU_TOFU",
        }
    }

    /// The name a process was started by (its `argv[0]`), if it is one of the shim's.
    pub fn from_arg0(arg0: &OsStr) -> Option<ShimName> {
        let base = Path::new(arg0).file_name()?;
        ShimName::ALL.into_iter().find(|n| base == n.program())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_names_are_shims() {
        assert_eq!(
            ShimName::from_arg0(OsStr::new("/x/bin/terraform")),
            Some(ShimName::Terraform)
        );
        assert_eq!(
            ShimName::from_arg0(OsStr::new("tofu")),
            Some(ShimName::Tofu)
        );
        for other in [
            "choudoufu-live",
            "/x/terraform-provider-live",
            "terraform.old",
            "",
        ] {
            assert_eq!(ShimName::from_arg0(OsStr::new(other)), None, "{other}");
        }
    }
}
