//! The go-plugin handshake: what the host says in the environment, and the one line the plugin answers.

use std::collections::BTreeSet;
use std::path::PathBuf;

use base64::Engine;
use thiserror::Error;

/// The cookie's variable name, as terraform sets it.
pub const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
/// The cookie's value, as terraform sets it.
pub const MAGIC_COOKIE_VALUE: &str =
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
/// go-plugin's core protocol version.
pub const CORE_PROTOCOL_VERSION: u32 = 1;
/// The plugin protocol this plugin speaks (tfplugin6).
pub const APP_PROTOCOL_VERSION: u32 = 6;

/// Why the plugin refuses to start; nothing is printed on stdout before one of these.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HandshakeError {
    /// Started without the host's cookie.
    #[error(
        "this is a plugin for Terraform, started by terraform itself (it was not given the plugin cookie).\nTo use the command line, give it a command: choudoufu-live --help"
    )]
    NoCookie,
    /// The host offers no protocol version this plugin speaks.
    #[error(
        "the host offers plugin protocol versions {offered:?}; choudoufu-live speaks only version 6 (Terraform 1.0 or later)"
    )]
    NoCommonVersion {
        /// What the host offered.
        offered: String,
    },
    /// A port range that cannot be used.
    #[error("invalid PLUGIN_MIN_PORT/PLUGIN_MAX_PORT: {0}")]
    BadPorts(String),
    /// A client certificate that is not PEM.
    #[error("PLUGIN_CLIENT_CERT is not a PEM certificate: {0}")]
    BadClientCert(String),
}

/// What the host told the plugin through the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostEnv {
    /// The first port to listen on.
    pub min_port: u16,
    /// The last port to listen on.
    pub max_port: u16,
    /// Listen on a unix socket in this folder instead of TCP.
    pub unix_dir: Option<PathBuf>,
    /// The host's client certificate (DER) to pin, when it asks for mTLS.
    pub client_cert: Option<Vec<u8>>,
}

/// Whether the environment carries terraform's plugin cookie.
pub fn has_cookie(get: &dyn Fn(&str) -> Option<String>) -> bool {
    get(MAGIC_COOKIE_KEY).as_deref() == Some(MAGIC_COOKIE_VALUE)
}

/// Read the host's environment (`get` looks a variable up).
pub fn read_env(get: &dyn Fn(&str) -> Option<String>) -> Result<HostEnv, HandshakeError> {
    if !has_cookie(get) {
        return Err(HandshakeError::NoCookie);
    }
    let offered = get("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default();
    let versions: BTreeSet<u32> = offered
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    if !versions.contains(&APP_PROTOCOL_VERSION) {
        return Err(HandshakeError::NoCommonVersion { offered });
    }
    let port = |name: &str, default: u16| -> Result<u16, HandshakeError> {
        match get(name).filter(|v| !v.is_empty()) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u16>()
                .map_err(|_| HandshakeError::BadPorts(format!("{name}={v}"))),
        }
    };
    let min_port = port("PLUGIN_MIN_PORT", 10000)?;
    let max_port = port("PLUGIN_MAX_PORT", 25000)?;
    if min_port > max_port || min_port == 0 {
        return Err(HandshakeError::BadPorts(format!("{min_port}..{max_port}")));
    }
    let client_cert = match get("PLUGIN_CLIENT_CERT").filter(|v| !v.trim().is_empty()) {
        None => None,
        Some(pem) => Some(pem_to_der(&pem)?),
    };
    Ok(HostEnv {
        min_port,
        max_port,
        unix_dir: get("PLUGIN_UNIX_SOCKET_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
        client_cert,
    })
}

fn pem_to_der(pem: &str) -> Result<Vec<u8>, HandshakeError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map(|c| c.as_ref().to_vec())
        .map_err(|e| HandshakeError::BadClientCert(format!("{e:?}")))
}

/// Where the plugin listens, as the handshake line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address.
    Tcp(std::net::SocketAddr),
    /// A unix socket path.
    Unix(PathBuf),
}

/// The handshake line: `1|6|tcp|127.0.0.1:PORT|grpc|<server cert, base64 DER without padding>`.
pub fn line(listen: &Listen, server_cert_der: Option<&[u8]>) -> String {
    let (network, addr) = match listen {
        Listen::Tcp(a) => ("tcp", a.to_string()),
        Listen::Unix(p) => ("unix", p.display().to_string()),
    };
    let cert = server_cert_der
        .map(|der| base64::engine::general_purpose::STANDARD_NO_PAD.encode(der))
        .unwrap_or_default();
    format!("{CORE_PROTOCOL_VERSION}|{APP_PROTOCOL_VERSION}|{network}|{addr}|grpc|{cert}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn versions_are_a_set() {
        for offered in ["5,6", "6,5", "6", " 6 , 5 "] {
            let e = env(&[
                (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
                ("PLUGIN_PROTOCOL_VERSIONS", offered),
            ]);
            assert!(read_env(&e).is_ok(), "{offered}");
        }
        let e = env(&[
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_PROTOCOL_VERSIONS", "4,5"),
        ]);
        assert!(matches!(
            read_env(&e),
            Err(HandshakeError::NoCommonVersion { .. })
        ));
    }

    #[test]
    fn no_cookie_no_plugin() {
        let e = env(&[
            (MAGIC_COOKIE_KEY, "wrong"),
            ("PLUGIN_PROTOCOL_VERSIONS", "6"),
        ]);
        assert_eq!(read_env(&e), Err(HandshakeError::NoCookie));
    }

    #[test]
    fn the_line_has_no_base64_padding() {
        let l = line(
            &Listen::Tcp("127.0.0.1:10001".parse().unwrap()),
            Some(&[1, 2, 3, 4]),
        );
        assert_eq!(l, "1|6|tcp|127.0.0.1:10001|grpc|AQIDBA");
    }
}
