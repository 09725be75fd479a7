//! TLS (rustls): the server configuration built from `tls-cert-file`, `tls-key-file`,
//! `tls-ca-cert-file` and `tls-auth-clients`. A TLS client is a connection of the executor's
//! event loop like a plain one, with a rustls session over its socket (exec/net.rs); only the
//! handshake is extra, with a deadline, so a peer that stalls or speaks plain text costs one
//! socket for a bounded time and nothing else.

use crate::config::{Config, TlsAuthClients};
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
    RootCertStore, ServerConfig,
};
use std::sync::Arc;
use std::time::Duration;

/// How long a TLS handshake may take before the connection is dropped (checked by the cron,
/// so up to a tenth of a second later).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the configuration; the error is a start-up message naming the file or setting at
/// fault.
pub fn server_config(cfg: &Config) -> Result<Arc<ServerConfig>, String> {
    if cfg.tls_cert_file.is_empty() || cfg.tls_key_file.is_empty() {
        return Err(
            "Failed to configure TLS: tls-port needs tls-cert-file and tls-key-file".into(),
        );
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cfg.tls_cert_file)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("Failed to load certificate: {}: {e}", cfg.tls_cert_file))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {}: no certificate found",
            cfg.tls_cert_file
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&cfg.tls_key_file)
        .map_err(|e| format!("Failed to load private key: {}: {e}", cfg.tls_key_file))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("Failed to configure TLS: {e}"))?;
    let builder = match cfg.tls_auth_clients {
        TlsAuthClients::No => builder.with_no_client_auth(),
        mode => {
            if cfg.tls_ca_cert_file.is_empty() {
                return Err(format!(
                    "Failed to configure TLS: tls-auth-clients {} needs tls-ca-cert-file (or set tls-auth-clients no)",
                    mode.name()
                ));
            }
            let mut roots = RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(&cfg.tls_ca_cert_file)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    format!(
                        "Failed to load CA certificate(s): {}: {e}",
                        cfg.tls_ca_cert_file
                    )
                })?;
            for ca in cas {
                roots.add(ca).map_err(|e| {
                    format!(
                        "Failed to load CA certificate(s): {}: {e}",
                        cfg.tls_ca_cert_file
                    )
                })?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "Failed to load CA certificate(s): {}: no certificate found",
                    cfg.tls_ca_cert_file
                ));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if mode == TlsAuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("Failed to configure TLS client verification: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let server = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("Failed to configure TLS: certificate and key: {e}"))?;
    Ok(Arc::new(server))
}
