//! Trusting a self-signed gateway by its certificate's SHA-256 fingerprint.
//!
//! First contact: [`fetch_certificate`] reads the certificate the server presents (without
//! trusting it) so the user can compare its fingerprint with the one the gateway printed at
//! start-up (`TLS: self-signed certificate ... (SHA-256 fingerprint AB:CD:...)`). Once the user
//! accepts it, [`ServerCertificate::to_pem`] is saved and passed as [`crate::ClientOptions::ca_cert`]:
//! from then on that certificate, and only it, is trusted in addition to the system roots, so a
//! different certificate later fails the handshake instead of being accepted silently.

use std::time::Duration;

use sha2::Digest;

use crate::error::{Error, Result};

/// The certificate a server presented, as DER, with its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCertificate {
    pub der: Vec<u8>,
    /// SHA-256 of the DER, uppercase hex pairs joined by `:` (the gateway prints the same form).
    pub fingerprint: String,
}

impl ServerCertificate {
    pub fn from_der(der: Vec<u8>) -> Self {
        let fingerprint = fingerprint_of(&der);
        Self { der, fingerprint }
    }

    /// The certificate as a PEM file body.
    pub fn to_pem(&self) -> String {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.der);
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }

    /// Whether `fp` names this certificate (case, `:` and spaces are ignored).
    pub fn matches(&self, fp: &str) -> bool {
        normalize_fingerprint(fp) == normalize_fingerprint(&self.fingerprint)
    }
}

/// SHA-256 of `der` as `AB:CD:...`.
pub fn fingerprint_of(der: &[u8]) -> String {
    sha2::Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

fn normalize_fingerprint(fp: &str) -> String {
    fp.chars().filter(char::is_ascii_hexdigit).map(|c| c.to_ascii_uppercase()).collect()
}

/// Connects to `base_url` (`https://...`) WITHOUT checking its certificate and returns the
/// certificate it presented. Nothing is sent but `GET /api/v1/info` (no credentials), so an
/// impostor learns nothing; the caller must not trust the result until a person compared the
/// fingerprint.
pub async fn fetch_certificate(base_url: &str) -> Result<ServerCertificate> {
    let base = crate::normalize_base_url(base_url)?;
    if !base.starts_with("https://") {
        return Err(Error::Invalid(format!("{base} does not use HTTPS: there is no certificate to check")));
    }
    let http = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .connect_timeout(Duration::from_secs(30))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| Error::Invalid(format!("cannot set up the HTTP client: {e}")))?;
    let resp = http.get(format!("{base}/api/v1/info")).send().await?;
    let der = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|t| t.peer_certificate())
        .ok_or_else(|| Error::Invalid(format!("{base} presented no certificate")))?;
    Ok(ServerCertificate::from_der(der.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_format_and_matching() {
        let c = ServerCertificate::from_der(b"abc".to_vec());
        // SHA-256("abc"), the FIPS 180-2 test vector.
        assert!(c.fingerprint.starts_with("BA:78:16:BF:8F:01:CF:EA"), "{}", c.fingerprint);
        assert_eq!(c.fingerprint.len(), 32 * 3 - 1);
        assert!(c.matches(&c.fingerprint.to_lowercase().replace(':', " ")));
        assert!(!c.matches("BA:78"));
        let pem = c.to_pem();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\nYWJj\n"), "{pem}");
    }
}
