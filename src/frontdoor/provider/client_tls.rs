//! AutoMTLS from the host's side, as go-plugin's client does it: our own certificate, and only the plugin's announced one accepted.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, Error, SignatureScheme};

use crate::frontdoor::plugin::tls::{Pinned, ServerIdentity, provider};

/// The certificate the door presents to every plugin it starts (`PLUGIN_CLIENT_CERT`).
pub struct ClientIdentity(ServerIdentity);

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private key.
        f.debug_struct("ClientIdentity").finish_non_exhaustive()
    }
}

impl ClientIdentity {
    /// A fresh self-signed certificate, a CA with client and server use, as go-plugin's own.
    pub fn generate() -> Result<ClientIdentity, rcgen::Error> {
        crate::frontdoor::plugin::tls::server_identity().map(ClientIdentity)
    }

    /// The certificate as PEM, for `PLUGIN_CLIENT_CERT`.
    pub fn cert_pem(&self) -> String {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.0.cert_der);
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for chunk in b64.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(chunk));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }

    /// The TLS client configuration for one plugin: this certificate, `server_der` pinned, ALPN h2.
    pub fn config(&self, server_der: Vec<u8>) -> Result<Arc<ClientConfig>, Error> {
        let provider = provider();
        let verifier = Arc::new(PinnedServer(Pinned::new(server_der, &provider)));
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(
                vec![CertificateDer::from(self.0.cert_der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.0.key_der.clone())),
            )?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Accepts exactly the certificate the plugin announced on its handshake line, byte for byte.
#[derive(Debug)]
struct PinnedServer(Pinned);

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        self.0.check(
            end_entity,
            false,
            ServerCertVerified::assertion(),
            "refused a provider plugin certificate it did not announce",
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.tls12(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.schemes()
    }
}
