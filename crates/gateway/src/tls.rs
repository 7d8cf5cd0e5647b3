//! Native TLS, so that pages served over https can reach the gateway at `wss://` without a
//! proxy in front: a certificate chain and its key from PEM files, loaded again on demand
//! (SIGHUP in the binary) without touching the connections already open.
//!
//! Built on rustls through tokio-rustls with the `ring` provider: memory-safe, no system
//! OpenSSL to match, and `ring` builds with the C compiler alone (aws-lc-rs, rustls's
//! default, needs cmake). TLS 1.2 and 1.3, rustls's safe defaults; no client certificates;
//! ALPN `http/1.1`, the only protocol a WebSocket upgrade here speaks.
//!
//! The BOLT 8 handshake inside still authenticates the gateway to every client (its node
//! id is pinned in the connect string): TLS is there because browsers require it of https
//! pages, and so that the network between sees no more than with any https site.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use pki_types::pem::PemObject;
use pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, ServerConfig};

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read or holds no PEM section of the kind needed.
    #[error("{}: {why}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("{} with {}: {source}", cert.display(), key.display())]
    Refused {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
}

/// The certificate and key the gateway serves `wss://` with, and the files they came from.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    acceptor: RwLock<TlsAcceptor>,
}

impl Tls {
    /// Load the chain in `cert` (the server's certificate first, then intermediates) and
    /// the private key in `key` (PKCS#8, PKCS#1 or SEC1), both PEM.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let acceptor = acceptor(cert, key)?;
        Ok(Tls {
            cert: cert.to_owned(),
            key: key.to_owned(),
            acceptor: RwLock::new(acceptor),
        })
    }

    /// Read both files again and use them for the connections accepted from now on;
    /// open connections keep the certificate they were accepted with. On an error nothing
    /// changes: the gateway goes on with the last good pair.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = acceptor(&self.cert, &self.key)?;
        *self
            .acceptor
            .write()
            .unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// What accepts the next connection (a cheap clone of an `Arc`).
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let pem = |path: &Path, e: &dyn std::fmt::Display| TlsError::Pem {
        path: path.to_owned(),
        why: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(cert, &e))?;
    if chain.is_empty() {
        return Err(pem(cert, &"no CERTIFICATE section"));
    }
    let secret = PrivateKeyDer::from_pem_file(key).map_err(|e| pem(key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let refused = |source| TlsError::Refused {
        cert: cert.to_owned(),
        key: key.to_owned(),
        source,
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(refused)?
        .with_no_client_auth()
        .with_single_cert(chain, secret)
        .map_err(refused)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// An accepted connection, in clear or in TLS: what the connection loop reads and writes.
pub enum Stream {
    /// `ws://`.
    Plain(tokio::net::TcpStream),
    /// `wss://`.
    Tls(Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>),
}

macro_rules! both {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => {
                let $s = std::pin::Pin::new($s);
                $e
            }
            Stream::Tls($s) => {
                let $s = std::pin::Pin::new(&mut **$s);
                $e
            }
        }
    };
}

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        both!(self, s => s.poll_read(cx, buf))
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        both!(self, s => s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        both!(self, s => s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        both!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        both!(self, s => s.poll_shutdown(cx))
    }
}
