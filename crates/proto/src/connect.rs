//! Connect strings: a gateway's WebSocket address and the static key the handshake pins,
//! `ws[s]://host:port[/path]#<node-id-hex>`.

use lightwire_noise::PublicKey;

/// A gateway's address and key, from a connect string `ws[s]://host:port#<node-id-hex>`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ConnectString {
    /// The WebSocket URL (without the fragment).
    pub url: String,
    /// The gateway's static key, pinned for the handshake.
    pub node_id: PublicKey,
}

/// Why a connect string was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ConnectStringError {
    /// Not `ws://` or `wss://`.
    #[error("a gateway address starts with ws:// or wss://")]
    Scheme,
    /// No `#<node-id>` after the address.
    #[error("a gateway address ends with #<node id> (the gateway's public key, 66 hex digits)")]
    MissingNodeId,
    /// The node id is not a 33-byte compressed public key in hex.
    #[error("the node id after # is not a 33-byte compressed public key in hex")]
    BadNodeId,
    /// No host.
    #[error("the gateway address has no host")]
    MissingHost,
}

impl ConnectString {
    /// Parse `ws[s]://host:port#<node-id-hex>` (surrounding whitespace ignored).
    pub fn parse(s: &str) -> Result<ConnectString, ConnectStringError> {
        let s = s.trim();
        let rest = s
            .strip_prefix("ws://")
            .or_else(|| s.strip_prefix("wss://"))
            .ok_or(ConnectStringError::Scheme)?;
        let (address, id) = rest
            .split_once('#')
            .ok_or(ConnectStringError::MissingNodeId)?;
        if address.is_empty() || address.starts_with('/') {
            return Err(ConnectStringError::MissingHost);
        }
        let bytes = hex::decode(id).map_err(|_| ConnectStringError::BadNodeId)?;
        let node_id = PublicKey::from_slice(&bytes).map_err(|_| ConnectStringError::BadNodeId)?;
        let url = s[..s.len() - id.len() - 1].to_string();
        Ok(ConnectString { url, node_id })
    }

    /// `host:port` (and the path, if any) of the URL, without the scheme.
    pub fn authority(&self) -> &str {
        self.url
            .strip_prefix("ws://")
            .or_else(|| self.url.strip_prefix("wss://"))
            .unwrap_or(&self.url)
    }
}

impl core::fmt::Display for ConnectString {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}#{}", self.url, hex::encode(self.node_id.serialize()))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn connect_strings() {
        let id = "0271979bbcaeab937120bac197c1cfe4248e85cc1263a7add019937772ed19945b";
        let c = ConnectString::parse(&format!("ws://127.0.0.1:8335#{id}")).unwrap();
        assert_eq!(c.url, "ws://127.0.0.1:8335");
        assert_eq!(c.authority(), "127.0.0.1:8335");
        assert_eq!(c.node_id.serialize().to_vec(), hex::decode(id).unwrap());
        assert_eq!(c.to_string(), format!("ws://127.0.0.1:8335#{id}"));
        let c = ConnectString::parse(&format!(" wss://gw.example:443/x#{id} ")).unwrap();
        assert_eq!(c.url, "wss://gw.example:443/x");
        assert_eq!(
            ConnectString::parse(&format!("http://h:1#{id}")),
            Err(ConnectStringError::Scheme)
        );
        assert_eq!(
            ConnectString::parse("ws://h:1"),
            Err(ConnectStringError::MissingNodeId)
        );
        assert_eq!(
            ConnectString::parse("ws://h:1#02abc"),
            Err(ConnectStringError::BadNodeId)
        );
        assert_eq!(
            ConnectString::parse(&format!("ws://#{id}")),
            Err(ConnectStringError::MissingHost)
        );
        let bad_point = format!("02{}", "ff".repeat(32));
        assert_eq!(
            ConnectString::parse(&format!("ws://h:1#{bad_point}")),
            Err(ConnectStringError::BadNodeId)
        );
    }
}
