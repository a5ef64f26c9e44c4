//! A go-plugin host, as terraform is one: cookie, versions, port range, a P-521 CA client
//! certificate, the handshake line, mTLS with the server certificate pinned, health, Shutdown.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use choudoufu_live::frontdoor::plugin::proto::plugin::grpc_controller_client::GrpcControllerClient;
use choudoufu_live::frontdoor::plugin::proto::tfplugin6::provider_client::ProviderClient;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tonic::transport::{Channel, Endpoint, Uri};

pub const COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// A client certificate as go-plugin's host makes one: ECDSA P-521, SHA-512, marked CA.
pub struct ClientCert {
    pub pem: String,
    pub der: Vec<u8>,
    pub key_der: Vec<u8>,
}

pub fn client_cert() -> ClientCert {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose, PKCS_ECDSA_P521_SHA512,
    };
    let key = KeyPair::generate_for(&PKCS_ECDSA_P521_SHA512).unwrap();
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p.distinguished_name
        .push(DnType::OrganizationName, "HashiCorp");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ClientAuth,
        ExtendedKeyUsagePurpose::ServerAuth,
    ];
    let cert = p.self_signed(&key).unwrap();
    ClientCert {
        pem: cert.pem(),
        der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    }
}

/// Accepts exactly the server certificate the handshake line named.
#[derive(Debug)]
struct PinnedServer {
    der: Vec<u8>,
    algs: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        ee: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if ee.as_ref() == self.der.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "server certificate is not the one in the handshake line".into(),
            ))
        }
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.algs)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.algs)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// What the plugin said in its handshake line.
#[derive(Debug, Clone)]
pub struct Line {
    pub network: String,
    pub address: String,
    pub cert: Option<Vec<u8>>,
    pub raw: String,
}

pub fn parse_line(raw: &str) -> Line {
    let parts: Vec<&str> = raw.trim_end().split('|').collect();
    assert_eq!(parts.len(), 6, "handshake line {raw:?}");
    assert_eq!(parts[0], "1", "core protocol version");
    assert_eq!(parts[1], "6", "app protocol version");
    assert_eq!(parts[4], "grpc");
    let cert = if parts[5].is_empty() {
        None
    } else {
        assert!(
            !parts[5].ends_with('='),
            "the certificate is base64 without padding: {}",
            parts[5]
        );
        Some(
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(parts[5])
                .expect("certificate base64"),
        )
    };
    Line {
        network: parts[2].into(),
        address: parts[3].into(),
        cert,
        raw: raw.to_string(),
    }
}

/// A running plugin process.
pub struct Plugin {
    pub child: Child,
    pub line: Line,
    pub stderr: Arc<std::sync::Mutex<Vec<String>>>,
}

pub struct Launch<'a> {
    pub versions: &'a str,
    pub cookie: &'a str,
    pub client_cert: Option<&'a ClientCert>,
    pub unix_dir: Option<&'a Path>,
    pub cwd: &'a Path,
    pub min_port: u16,
    pub max_port: u16,
}

impl<'a> Launch<'a> {
    pub fn new(cwd: &'a Path, cert: Option<&'a ClientCert>) -> Self {
        Launch {
            versions: "5,6",
            cookie: COOKIE,
            client_cert: cert,
            unix_dir: None,
            cwd,
            min_port: 10000,
            max_port: 25000,
        }
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(crate::tf::bin());
        c.current_dir(self.cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TF_PLUGIN_MAGIC_COOKIE", self.cookie)
            .env("PLUGIN_PROTOCOL_VERSIONS", self.versions)
            .env("PLUGIN_MIN_PORT", self.min_port.to_string())
            .env("PLUGIN_MAX_PORT", self.max_port.to_string())
            .env("CHOUDOUFU_PROGRAM_COMMIT", "harness")
            .env("CHOUDOUFU_PROGRAM_TIME", "2026-11-30T00:00:00Z");
        for k in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            "AWS_EC2_METADATA_DISABLED",
            "CHOUDOUFU_CUT",
        ] {
            if let Ok(v) = std::env::var(k) {
                c.env(k, v);
            }
        }
        if let Some(cert) = self.client_cert {
            c.env("PLUGIN_CLIENT_CERT", &cert.pem);
        }
        if let Some(dir) = self.unix_dir {
            c.env("PLUGIN_UNIX_SOCKET_DIR", dir);
        }
        c
    }

    /// Start the plugin and read its handshake line.
    pub fn start(&self) -> Plugin {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start plugin");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut s = String::new();
            let _ = r.read_line(&mut s);
            let _ = tx.send(s);
            // Keep draining so the plugin never blocks on stdout.
            let mut sink = String::new();
            while r.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        let stderr = Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(l);
            }
        });
        let raw = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a handshake line within 20 s");
        Plugin {
            child,
            line: parse_line(&raw),
            stderr,
        }
    }
}

impl Plugin {
    /// A gRPC channel: mTLS with `cert` when the line has a certificate, plain otherwise.
    pub async fn channel_with(
        &self,
        cert: Option<&ClientCert>,
    ) -> Result<Channel, tonic::transport::Error> {
        let line = self.line.clone();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = line.cert.clone().map(|server_der| {
            let verifier = Arc::new(PinnedServer {
                der: server_der,
                algs: provider.signature_verification_algorithms,
            });
            let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(verifier);
            let mut config = match cert {
                Some(c) => builder
                    .with_client_auth_cert(
                        vec![CertificateDer::from(c.der.clone())],
                        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key_der.clone())),
                    )
                    .unwrap(),
                None => builder.with_no_client_auth(),
            };
            config.alpn_protocols = vec![b"h2".to_vec()];
            tokio_rustls::TlsConnector::from(Arc::new(config))
        });
        let endpoint =
            Endpoint::try_from("http://localhost")?.connect_timeout(Duration::from_secs(5));
        endpoint
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let line = line.clone();
                let tls = tls.clone();
                async move {
                    let io: Box<dyn IoStream> = if line.network == "unix" {
                        let s = tokio::net::UnixStream::connect(&line.address).await?;
                        match tls {
                            Some(t) => Box::new(
                                t.connect(ServerName::try_from("localhost").unwrap(), s)
                                    .await?,
                            ),
                            None => Box::new(s),
                        }
                    } else {
                        let s = tokio::net::TcpStream::connect(&line.address).await?;
                        match tls {
                            Some(t) => Box::new(
                                t.connect(ServerName::try_from("localhost").unwrap(), s)
                                    .await?,
                            ),
                            None => Box::new(s),
                        }
                    };
                    Ok::<_, std::io::Error>(TokioIo::new(io))
                }
            }))
            .await
    }

    pub async fn provider(&self, cert: Option<&ClientCert>) -> ProviderClient<Channel> {
        ProviderClient::new(self.channel_with(cert).await.expect("connect"))
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20)
    }

    /// Send Shutdown and return how long the process took to exit.
    pub async fn shutdown(&mut self, cert: Option<&ClientCert>) -> Duration {
        let mut ctl = GrpcControllerClient::new(self.channel_with(cert).await.expect("connect"));
        let t = Instant::now();
        ctl.shutdown(choudoufu_live::frontdoor::plugin::proto::plugin::Empty {})
            .await
            .expect("shutdown");
        loop {
            if self.child.try_wait().unwrap().is_some() {
                return t.elapsed();
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the plugin did not exit after Shutdown"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub trait IoStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> IoStream for T {}
