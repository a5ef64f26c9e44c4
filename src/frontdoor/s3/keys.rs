//! Which workspace an object key of the backend's bucket names: terraform's s3 backend keeps
//! the `default` workspace at `key` and workspace `w` at `<workspace_key_prefix>/w/<key>`, each
//! with its lock file beside it (`.tflock`).

/// The suffix of terraform's `use_lockfile` lock objects.
pub const LOCK_SUFFIX: &str = ".tflock";
/// The workspace whose state is at the key itself.
pub const DEFAULT_WORKSPACE: &str = "default";
/// terraform's default `workspace_key_prefix`.
pub const DEFAULT_PREFIX: &str = "env:";

/// Where terraform's s3 backend keeps its states: the bucket, the key and the workspace prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateKeys {
    /// The backend's bucket.
    pub bucket: String,
    /// The backend's `key`.
    pub key: String,
    /// The backend's `workspace_key_prefix` (default `env:`).
    pub prefix: String,
}

/// What an object key of the bucket is to the door.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Object {
    /// The state of a workspace.
    State(String),
    /// The `use_lockfile` lock of a workspace's state.
    Lock(String),
    /// Anything else: the door serves nothing there.
    Other,
}

impl StateKeys {
    /// The object key of workspace `ws`'s state.
    pub fn state_key(&self, ws: &str) -> String {
        if ws == DEFAULT_WORKSPACE {
            self.key.clone()
        } else {
            format!("{}/{ws}/{}", self.prefix, self.key)
        }
    }

    /// What `key` is: a workspace's state, its lock, or something else.
    pub fn object(&self, key: &str) -> Object {
        match key.strip_suffix(LOCK_SUFFIX) {
            Some(state) => match self.workspace_of(state) {
                Some(ws) => Object::Lock(ws),
                None => Object::Other,
            },
            None => match self.workspace_of(key) {
                Some(ws) => Object::State(ws),
                None => Object::Other,
            },
        }
    }

    fn workspace_of(&self, key: &str) -> Option<String> {
        if key == self.key {
            return Some(DEFAULT_WORKSPACE.to_string());
        }
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('/')?;
        let (ws, tail) = rest.split_once('/')?;
        (tail == self.key && !ws.is_empty() && ws != DEFAULT_WORKSPACE).then(|| ws.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> StateKeys {
        StateKeys {
            bucket: "b".into(),
            key: "net/terraform.tfstate".into(),
            prefix: DEFAULT_PREFIX.into(),
        }
    }

    #[test]
    fn states_and_locks_by_workspace() {
        let k = keys();
        assert_eq!(k.state_key("default"), "net/terraform.tfstate");
        assert_eq!(k.state_key("dev"), "env:/dev/net/terraform.tfstate");
        for ws in ["default", "dev"] {
            assert_eq!(k.object(&k.state_key(ws)), Object::State(ws.into()));
            assert_eq!(
                k.object(&format!("{}{LOCK_SUFFIX}", k.state_key(ws))),
                Object::Lock(ws.into())
            );
        }
        for other in [
            "terraform.tfstate",
            "env:/dev/other.tfstate",
            "env:/default/net/terraform.tfstate",
            "env://net/terraform.tfstate",
            "tofu-records/x/_estate",
        ] {
            assert_eq!(k.object(other), Object::Other, "{other}");
        }
    }
}
