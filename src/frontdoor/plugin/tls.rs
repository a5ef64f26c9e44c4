//! AutoMTLS as go-plugin does it: a fresh server certificate, and only the host's exact certificate accepted.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, ServerConfig,
    SignatureScheme,
};

/// The crypto provider used everywhere in this process (aws-lc-rs: it verifies the host's P-521 signatures).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A server certificate and its key.
pub struct ServerIdentity {
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The PKCS#8 private key, DER.
    pub key_der: Vec<u8>,
}

/// Make a fresh self-signed certificate for `localhost`, shaped like go-plugin's own.
pub fn server_identity() -> Result<ServerIdentity, rcgen::Error> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
    };
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "choudoufu-live");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::seconds(30);
    params.not_after = now + time::Duration::days(365 * 30);
    let cert = params.self_signed(&key)?;
    Ok(ServerIdentity {
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    })
}

/// Accepts exactly one client certificate, byte for byte, and checks the handshake signature with it.
#[derive(Debug)]
pub struct PinnedClient {
    pinned: Vec<u8>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedClient {
    /// A verifier that accepts only `der`.
    pub fn new(der: Vec<u8>, provider: &CryptoProvider) -> Self {
        PinnedClient {
            pinned: der,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for PinnedClient {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if end_entity.as_ref() == self.pinned.as_slice()
            || crate::cut::cut(crate::cut::Mechanism::ClientPinning)
        {
            Ok(ClientCertVerified::assertion())
        } else {
            tracing::warn!("refused a client certificate that is not the host's");
            Err(Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }

    fn client_auth_mandatory(&self) -> bool {
        !crate::cut::cut(crate::cut::Mechanism::ClientPinning)
    }
}

/// The TLS server configuration: our identity, the pinned host certificate required, ALPN h2.
pub fn server_config(
    identity: &ServerIdentity,
    client_der: Vec<u8>,
) -> Result<ServerConfig, Error> {
    let provider = provider();
    let verifier = Arc::new(PinnedClient::new(client_der, &provider));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(identity.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der.clone())),
        )?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}
