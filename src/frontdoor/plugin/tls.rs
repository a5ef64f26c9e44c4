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

/// One certificate accepted byte for byte, and the handshake's signatures checked with it: each side of AutoMTLS pins its peer's.
#[derive(Debug)]
pub struct Pinned {
    der: Vec<u8>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl Pinned {
    /// Pin `der`, checking signatures with `provider`'s algorithms.
    pub fn new(der: Vec<u8>, provider: &CryptoProvider) -> Self {
        Pinned {
            der,
            algorithms: provider.signature_verification_algorithms,
        }
    }

    /// `verified` when `end_entity` is the pinned certificate (or `open`), else refused, with `refusal` logged.
    pub fn check<T>(
        &self,
        end_entity: &CertificateDer<'_>,
        open: bool,
        verified: T,
        refusal: &str,
    ) -> Result<T, Error> {
        if open || end_entity.as_ref() == self.der.as_slice() {
            Ok(verified)
        } else {
            tracing::warn!("{refusal}");
            Err(Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    /// Check a TLS 1.2 handshake signature.
    pub fn tls12(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    /// Check a TLS 1.3 handshake signature.
    pub fn tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    /// The signature schemes it can check.
    pub fn schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Accepts exactly one client certificate, byte for byte, and checks the handshake signature with it.
#[derive(Debug)]
pub struct PinnedClient(Pinned);

impl PinnedClient {
    /// A verifier that accepts only `der`.
    pub fn new(der: Vec<u8>, provider: &CryptoProvider) -> Self {
        PinnedClient(Pinned::new(der, provider))
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
        self.0.check(
            end_entity,
            crate::cut::cut(crate::cut::Mechanism::ClientPinning),
            ClientCertVerified::assertion(),
            "refused a client certificate that is not the host's",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_accepts_its_own_certificate_only() {
        let ours = server_identity().unwrap().cert_der;
        let other = server_identity().unwrap().cert_der;
        let pin = Pinned::new(ours.clone(), &provider());
        let check =
            |der: &[u8], open| pin.check(&CertificateDer::from(der.to_vec()), open, (), "refused");
        assert!(check(&ours, false).is_ok());
        assert!(matches!(
            check(&other, false),
            Err(Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure
            ))
        ));
        assert!(check(&[], false).is_err());
        // Open (the client-pinning mechanism cut): anything passes.
        assert!(check(&other, true).is_ok());
        assert!(!pin.schemes().is_empty());
    }
}
