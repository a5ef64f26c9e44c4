//! `TF_REATTACH_PROVIDERS`: the providers terraform reaches through the door instead of starting them.

use std::path::Path;

use super::lockfile::ProviderAddress;

/// The variable terraform reads.
pub const REATTACH_ENV: &str = "TF_REATTACH_PROVIDERS";

/// One provider's entry: where its socket is and the protocol its plugins speak.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    /// The provider, as the lock file names it.
    pub address: &'a ProviderAddress,
    /// The plugin protocol (5 or 6).
    pub protocol: u32,
    /// The door's socket for it.
    pub socket: &'a Path,
}

/// The variable's value for `entries`, with `pid` as the process terraform watches.
///
/// `Test: true` keeps terraform from sending Shutdown to, and killing, `Pid` after each walk;
/// go-plugin still polls `Pid` every second and cancels every call once it is gone, so with
/// `run`'s own pid no provider call outlives `run`.
pub fn value(entries: &[Entry], pid: u32) -> String {
    let mut map = serde_json::Map::new();
    for e in entries {
        map.insert(
            e.address.to_string(),
            serde_json::json!({
                "Protocol": "grpc",
                "ProtocolVersion": e.protocol,
                "Pid": pid,
                "Test": true,
                "Addr": {"Network": "unix", "String": e.socket.display().to_string()},
            }),
        );
    }
    serde_json::Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_terraform_reads() {
        let aws = ProviderAddress::parse("registry.terraform.io/hashicorp/aws").unwrap();
        let v: serde_json::Value = serde_json::from_str(&value(
            &[Entry {
                address: &aws,
                protocol: 5,
                socket: Path::new("/tmp/d/aws.sock"),
            }],
            42,
        ))
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"registry.terraform.io/hashicorp/aws": {
                "Protocol": "grpc", "ProtocolVersion": 5, "Pid": 42, "Test": true,
                "Addr": {"Network": "unix", "String": "/tmp/d/aws.sock"}}})
        );
    }
}
