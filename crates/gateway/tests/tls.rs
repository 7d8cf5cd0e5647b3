//! The gateway's native TLS (`wss://`), on real sockets: a certificate authority and
//! certificates made by the test (rcgen), a client that trusts only that authority, a
//! whole sync through TLS, and a reload (what SIGHUP does) that new connections see while
//! the open one goes on; a bad pair is refused and changes nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lightwire_chain::REGTEST;
use lightwire_gateway::client::{Client, ClientError, Framing};
use lightwire_gateway::served::ServedChain;
use lightwire_gateway::server::{Buffers, Shared};
use lightwire_gateway::tls::Tls;
use lightwire_noise::SecretKey;
use lightwire_wire::{GetHeaders, Message};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

/// A certificate authority, and what it signs.
struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Authority {
    fn new() -> Authority {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Authority { cert, key }
    }

    /// A certificate for localhost and 127.0.0.1, and its key, as PEM files in `dir`.
    fn issue(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    /// A client configuration that trusts this authority alone.
    fn client(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lightwire-tls-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Ask for `max_count` headers after genesis; how many came.
async fn sync<S>(c: &mut Client<S>, max_count: u32) -> u32
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let req = GetHeaders {
        id: 1,
        max_count,
        stop_hash: [0; 32],
        locator: &REGTEST.genesis.block_hash().0,
    };
    c.send(&Message::GetHeaders(req)).await.unwrap();
    let mut got = 0;
    while got < max_count {
        let (n, last) = tokio::time::timeout(
            Duration::from_secs(10),
            c.recv(|m| match Message::decode(m) {
                Ok(Message::Headers(h)) => (h.count() as u32, h.last),
                Ok(_) => (0, false),
                Err(e) => panic!("{e}"),
            }),
        )
        .await
        .expect("answered in time")
        .unwrap();
        got += n;
        if last {
            break;
        }
    }
    got
}

#[tokio::test]
async fn a_sync_over_native_tls_and_a_reload_that_new_connections_see() {
    let dir = scratch("reload");
    let (old_ca, new_ca) = (Authority::new(), Authority::new());
    let (cert, key) = old_ca.issue(&dir, "gateway");
    let chain = ServedChain::generate(5_000, 2_000_000_000).unwrap();
    let gw = Shared::builder(chain, SecretKey::from_bytes(&[0x11; 32]).unwrap())
        .buffers(Buffers::pooled(4))
        .tls(Tls::load(&cert, &key).expect("a good pair"))
        .spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let genesis = REGTEST.genesis.block_hash().0;
    let connect = |config, name: &'static str| {
        Client::connect_tls(
            gw.addr,
            name,
            config,
            &gw.node_id,
            genesis,
            Framing::OnePerFrame,
            false,
        )
    };

    let mut open = connect(old_ca.client(), "localhost")
        .await
        .expect("connects");
    open.recv(|_| ()).await.unwrap(); // init
    open.recv(|_| ()).await.unwrap(); // tip
    assert_eq!(sync(&mut open, 5_000).await, 5_000);
    // The certificate names 127.0.0.1 too; a name it does not carry is refused.
    connect(old_ca.client(), "127.0.0.1")
        .await
        .expect("by address");
    let wrong = connect(old_ca.client(), "gateway.example").await;
    assert!(
        matches!(wrong, Err(ClientError::Io(_))),
        "{:?}",
        wrong.err()
    );
    // A client that does not trust the authority is refused, and the gateway counts it.
    let untrusted = connect(new_ca.client(), "localhost").await;
    assert!(untrusted.is_err());
    let tls = gw.shared.front.tls.as_ref().unwrap();

    // A bad pair changes nothing.
    let (new_cert, new_key) = new_ca.issue(&dir, "rotated");
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let refused = tls.reload().expect_err("a key that is not one");
    assert!(refused.to_string().contains("gateway.key"), "{refused}");
    connect(old_ca.client(), "localhost")
        .await
        .expect("the old pair still serves");

    // The rotated pair: new connections get it, the open one goes on.
    std::fs::copy(&new_key, &key).unwrap();
    tls.reload().expect("the rotated pair");
    let mut fresh = connect(new_ca.client(), "localhost")
        .await
        .expect("new authority");
    fresh.recv(|_| ()).await.unwrap();
    fresh.recv(|_| ()).await.unwrap();
    assert!(connect(old_ca.client(), "localhost").await.is_err());
    assert_eq!(sync(&mut fresh, 2_000).await, 2_000);
    assert_eq!(
        sync(&mut open, 3_000).await,
        3_000,
        "the open connection goes on"
    );
    assert!(gw.shared.metrics.handshake_failures("tls") >= 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pairs_that_cannot_serve_are_refused_with_the_file_named() {
    let dir = scratch("bad");
    let ca = Authority::new();
    let (cert, key) = ca.issue(&dir, "a");
    let (_, other_key) = ca.issue(&dir, "b");
    let missing = dir.join("missing.pem");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    for (c, k, named) in [
        (&missing, &key, &missing),
        (&cert, &missing, &missing),
        (&empty, &key, &empty),
        (&cert, &empty, &empty),
        (&key, &key, &key),
    ] {
        let e = Tls::load(c, k).err().expect("refused");
        let file = named.file_name().unwrap().to_str().unwrap();
        assert!(e.to_string().contains(file), "{c:?} {k:?}: {e}");
    }
    // A key that is not the certificate's.
    let e = Tls::load(&cert, &other_key).err().expect("refused");
    assert!(
        matches!(e, lightwire_gateway::tls::TlsError::Refused { .. }),
        "{e}"
    );
    Tls::load(&cert, &key).expect("the matching pair");
    let _ = std::fs::remove_dir_all(&dir);
}
