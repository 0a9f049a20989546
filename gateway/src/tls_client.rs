//! TLS client configurations for the gateway's outgoing connections (LDAP, the lean block GET):
//! the roots to trust and the aws-lc provider, in one place.

use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

/// The system's trusted roots (`rustls-native-certs`: the OS store, or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR` when set). Certificates that do not parse are skipped.
pub fn native_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    roots
}

/// A client configuration that trusts `roots`, with the provider named here rather than the
/// process default (`ldap-sync` and tests install none).
pub fn config(roots: RootCertStore) -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
