//! Who may open a connection: at most [`Caps::max_connections`] client connections open in
//! all, and at most [`Caps::max_per_address`] from one address, so that one host cannot
//! take every connection (or every descriptor) the gateway has; and at most
//! [`Caps::max_new_per_second`] new connections a second from one address (each costs a
//! BOLT 8 handshake: two ECDH operations), so that one host cannot spend the gateway's
//! CPU by connecting and closing in a loop under the other caps.
//!
//! The rate is kept by GCRA (the generic cell rate algorithm): each address has a
//! theoretical arrival time, which each admitted connection moves one interval on; a
//! connection is refused while that time is more than a burst's worth of intervals
//! ahead of now. An address whose time has passed holds nothing and is pruned.
//!
//! The accept loop asks [`Admission::admit`] for each accepted socket before it spends
//! anything on it; a [`Slot`] counts the connection until it is dropped with it, and a
//! [`Refusal`] says which cap it met (the server answers it with a 503 and closes, or
//! over TLS closes without an answer, see `server.rs`). Refused sockets take no slot.
//!
//! A connection from a proxy the gateway trusts (`--trusted-proxy`) takes a slot counted in
//! the total only ([`Admission::admit_proxied`]); its upgrade request names the client, and
//! the slot is then counted against that client under the same per-address caps
//! ([`Admission::admit_forwarded`]) before any handshake.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The connection caps.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Caps {
    /// Client connections open at once, from everyone (at least 1).
    pub max_connections: usize,
    /// Client connections open at once from one [`Source`] (at least 1).
    pub max_per_address: usize,
    /// New connections a second from one [`Source`], in bursts of as many (at least 1).
    pub max_new_per_second: u32,
}

impl Caps {
    /// 20,000 connections: about 100 MB of heap when idle with pooled buffers (4.7 KiB
    /// each), well within a server's memory, and within the descriptor limit a service is
    /// usually given (raise `ulimit -n` above it).
    pub const DEFAULT_MAX_CONNECTIONS: usize = 20_000;
    /// 64 per address: a browser tab opens one connection per gateway, so 64 is dozens of
    /// tabs or users behind one NAT; a single host then needs 313 addresses to take all
    /// 20,000 connections.
    pub const DEFAULT_MAX_PER_ADDRESS: usize = 64;
    /// 20 a second: a tab reconnects with a backoff from 1 s, so this is twenty tabs behind
    /// one address reconnecting at once; one host spends at most 40 ECDH operations a
    /// second of the gateway's.
    pub const DEFAULT_MAX_NEW_PER_SECOND: u32 = 20;

    /// No cap worth the name (tests that open thousands of connections from one address).
    pub const UNLIMITED: Caps = Caps {
        max_connections: usize::MAX,
        max_per_address: usize::MAX,
        max_new_per_second: u32::MAX,
    };
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_connections: Caps::DEFAULT_MAX_CONNECTIONS,
            max_per_address: Caps::DEFAULT_MAX_PER_ADDRESS,
            max_new_per_second: Caps::DEFAULT_MAX_NEW_PER_SECOND,
        }
    }
}

/// Why a connection was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Refusal {
    /// [`Caps::max_connections`] connections were open.
    #[error("the gateway has its maximum of connections open")]
    MaxConnections,
    /// [`Caps::max_per_address`] connections were open from the same address.
    #[error("the client's address has its maximum of connections open")]
    MaxPerAddress,
    /// [`Caps::max_new_per_second`] new connections came from the same address.
    #[error("the client's address opens connections faster than allowed")]
    MaxNewPerSecond,
}

impl Refusal {
    /// Every reason, in the order `/metrics` lists them.
    pub const ALL: [Refusal; 3] = [
        Refusal::MaxConnections,
        Refusal::MaxPerAddress,
        Refusal::MaxNewPerSecond,
    ];

    /// A short label for metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::MaxPerAddress => "max_per_address",
            Refusal::MaxNewPerSecond => "max_new_per_second",
        }
    }
}

/// What one client counts as for [`Caps::max_per_address`]: an IPv4 address (also when it
/// arrives IPv4-mapped on an IPv6 listener), or an IPv6 address's /64 prefix, because one
/// subscriber is usually given a whole /64 and could otherwise open connections from as
/// many addresses as it likes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Source {
    /// An IPv4 address.
    V4([u8; 4]),
    /// The first 64 bits of an IPv6 address.
    V6([u8; 8]),
}

impl From<IpAddr> for Source {
    fn from(ip: IpAddr) -> Source {
        let v6 = match ip {
            IpAddr::V4(a) => return Source::V4(a.octets()),
            IpAddr::V6(a) => a,
        };
        if let Some(v4) = v6.to_ipv4_mapped() {
            return Source::V4(v4.octets());
        }
        let o = v6.octets();
        Source::V6([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
    }
}

/// The proxies whose `X-Forwarded-For` the gateway believes (`--trusted-proxy`): addresses
/// or CIDR blocks. A connection from anywhere else is its own client, whatever it sends.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct TrustedProxies(Vec<Block>);

/// One address block: the first `prefix` bits of `addr` (IPv4-mapped IPv6 addresses are
/// compared as IPv4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Block {
    addr: IpAddr,
    prefix: u8,
}

impl core::str::FromStr for Block {
    type Err = String;

    /// `ADDRESS` or `ADDRESS/PREFIX`.
    fn from_str(s: &str) -> Result<Block, String> {
        let bad = || format!("{s} is not an IP address or a CIDR block (ADDRESS/PREFIX)");
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().map_err(|_| bad())?)),
            None => (s, None),
        };
        let addr = canonical(addr.parse().map_err(|_| bad())?);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(bad());
        }
        Ok(Block { addr, prefix })
    }
}

impl Block {
    fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| match ip {
            IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
            IpAddr::V6(a) => u128::from(a),
        };
        let ip = canonical(ip);
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let mask = u128::MAX
            .checked_shl(128 - u32::from(self.prefix))
            .unwrap_or(0);
        bits(ip) & mask == bits(self.addr) & mask
    }
}

/// IPv4-mapped IPv6 addresses as IPv4 (a dual-stack listener sees IPv4 clients so).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl TrustedProxies {
    /// Trust these blocks.
    pub fn new(blocks: Vec<Block>) -> TrustedProxies {
        TrustedProxies(blocks)
    }

    /// Whether a connection from `ip` comes from a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|b| b.contains(ip))
    }

    /// Whether any proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The counts behind the caps.
#[derive(Default)]
struct Open {
    total: usize,
    /// Only sources with a connection open: an entry goes when its count reaches 0, so the
    /// map holds at most `max_connections` entries.
    by_source: HashMap<Source, usize>,
    /// Each source's theoretical arrival time (GCRA), while it is ahead of now.
    arrivals: HashMap<Source, Instant>,
    /// `arrivals` is pruned of passed times when it reaches this many entries.
    prune_at: usize,
}

/// Entries of `arrivals` before the first pruning.
const PRUNE_FLOOR: usize = 4096;

/// The caps and the connections they count (one lock, taken once when a connection is
/// accepted and once when it ends).
pub struct Admission {
    caps: Caps,
    open: Arc<Mutex<Open>>,
}

/// A connection's place under the caps, given back when dropped.
pub struct Slot {
    open: Arc<Mutex<Open>>,
    /// Whom it counts against; none yet for a connection from a trusted proxy until its
    /// upgrade request names the client ([`Admission::admit_forwarded`]).
    source: Option<Source>,
}

impl Admission {
    /// Count connections against `caps` (each cap at least 1).
    pub fn new(caps: Caps) -> Admission {
        Admission {
            caps: Caps {
                max_connections: caps.max_connections.max(1),
                max_per_address: caps.max_per_address.max(1),
                max_new_per_second: caps.max_new_per_second.max(1),
            },
            open: Arc::new(Mutex::new(Open {
                prune_at: PRUNE_FLOOR,
                ..Open::default()
            })),
        }
    }

    /// The caps.
    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// A slot for a connection from `ip`, or why there is none.
    pub fn admit(&self, ip: IpAddr) -> Result<Slot, Refusal> {
        self.admit_at(ip, Instant::now())
    }

    /// [`Self::admit`] at `now`.
    pub fn admit_at(&self, ip: IpAddr, now: Instant) -> Result<Slot, Refusal> {
        let source = Source::from(ip);
        // Nothing panics while the lock is held: a poisoned lock still holds good counts.
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.caps.max_connections {
            return Err(Refusal::MaxConnections);
        }
        self.admit_source(&mut open, source, now)?;
        open.total += 1;
        Ok(Slot {
            open: self.open.clone(),
            source: Some(source),
        })
    }

    /// A slot for a connection from a trusted proxy, counted in the total only: the
    /// proxy's own address is not the client's, and the client is counted once its upgrade
    /// request names it ([`Self::admit_forwarded`]).
    pub fn admit_proxied(&self) -> Result<Slot, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.caps.max_connections {
            return Err(Refusal::MaxConnections);
        }
        open.total += 1;
        Ok(Slot {
            open: self.open.clone(),
            source: None,
        })
    }

    /// Count `slot` (from [`Self::admit_proxied`]) against the client `ip` its proxy named,
    /// under the per-address caps, or say which one it meets (the slot then still counts
    /// in the total until dropped). A slot already counted against a client is left as
    /// it is.
    pub fn admit_forwarded(&self, slot: &mut Slot, ip: IpAddr) -> Result<(), Refusal> {
        self.admit_forwarded_at(slot, ip, Instant::now())
    }

    /// [`Self::admit_forwarded`] at `now`.
    pub fn admit_forwarded_at(
        &self,
        slot: &mut Slot,
        ip: IpAddr,
        now: Instant,
    ) -> Result<(), Refusal> {
        if slot.source.is_some() {
            return Ok(());
        }
        let source = Source::from(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        self.admit_source(&mut open, source, now)?;
        slot.source = Some(source);
        Ok(())
    }

    /// Count a new connection from `source` under the per-address caps (not the total).
    fn admit_source(&self, open: &mut Open, source: Source, now: Instant) -> Result<(), Refusal> {
        if open.by_source.get(&source).copied().unwrap_or(0) >= self.caps.max_per_address {
            return Err(Refusal::MaxPerAddress);
        }
        let rate = self.caps.max_new_per_second;
        if rate != u32::MAX {
            let interval = Duration::from_secs(1) / rate;
            let tolerance = interval * (rate - 1);
            let arrival = open.arrivals.get(&source).copied().unwrap_or(now).max(now);
            if arrival.duration_since(now) > tolerance {
                return Err(Refusal::MaxNewPerSecond);
            }
            if open.arrivals.len() >= open.prune_at {
                open.arrivals.retain(|_, t| *t > now);
                open.prune_at = (open.arrivals.len() * 2).max(PRUNE_FLOOR);
            }
            open.arrivals.insert(source, arrival + interval);
        }
        *open.by_source.entry(source).or_default() += 1;
        Ok(())
    }

    /// Connections holding a slot now.
    pub fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }

    /// Connections holding a slot now from `ip`'s [`Source`].
    pub fn open_from(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.by_source.get(&Source::from(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(source) = self.source
            && let Some(n) = open.by_source.get_mut(&source)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_source.remove(&source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn each_cap_refuses_with_its_reason_until_a_slot_is_given_back() {
        let a = Admission::new(Caps {
            max_connections: 3,
            max_per_address: 2,
            max_new_per_second: 1000,
        });
        let one = a.admit(ip("10.0.0.1")).unwrap();
        let _two = a.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(a.admit(ip("10.0.0.1")).err(), Some(Refusal::MaxPerAddress));
        let _three = a.admit(ip("10.0.0.2")).unwrap();
        // The whole cap is met first, whoever asks.
        assert_eq!(a.admit(ip("10.0.0.3")).err(), Some(Refusal::MaxConnections));
        assert_eq!(a.admit(ip("10.0.0.1")).err(), Some(Refusal::MaxConnections));
        assert_eq!((a.open(), a.open_from(ip("10.0.0.1"))), (3, 2));
        drop(one);
        assert_eq!((a.open(), a.open_from(ip("10.0.0.1"))), (2, 1));
        let _again = a.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(a.admit(ip("10.0.0.3")).err(), Some(Refusal::MaxConnections));
    }

    #[test]
    fn sources_that_close_leave_no_entry_behind() {
        let a = Admission::new(Caps::default());
        for i in 0..=255u8 {
            drop(a.admit(IpAddr::from([10, 0, 0, i])).unwrap());
        }
        assert_eq!(a.open(), 0);
        assert!(a.open.lock().unwrap().by_source.is_empty());
    }

    #[test]
    fn ipv6_counts_by_its_64_prefix_and_mapped_ipv4_as_ipv4() {
        let a = Admission::new(Caps {
            max_connections: 100,
            max_per_address: 1,
            max_new_per_second: 1000,
        });
        let _x = a.admit(ip("2001:db8:1:2::1")).unwrap();
        assert_eq!(
            a.admit(ip("2001:db8:1:2:ffff::9")).err(),
            Some(Refusal::MaxPerAddress)
        );
        let _y = a.admit(ip("2001:db8:1:3::1")).unwrap();
        let _z = a.admit(ip("192.0.2.7")).unwrap();
        assert_eq!(
            a.admit(ip("::ffff:192.0.2.7")).err(),
            Some(Refusal::MaxPerAddress)
        );
    }

    /// A proxy's connections count in the total at once, and against each client it
    /// names once named, under the same per-address caps as a direct connection.
    #[test]
    fn proxied_connections_count_against_the_client_the_proxy_names() {
        let a = Admission::new(Caps {
            max_connections: 4,
            max_per_address: 1,
            max_new_per_second: 1000,
        });
        let mut one = a.admit_proxied().unwrap();
        let mut two = a.admit_proxied().unwrap();
        assert_eq!((a.open(), a.open_from(ip("203.0.113.7"))), (2, 0));
        a.admit_forwarded(&mut one, ip("203.0.113.7")).unwrap();
        a.admit_forwarded(&mut one, ip("198.51.100.1")).unwrap();
        assert_eq!(a.open_from(ip("198.51.100.1")), 0, "named once only");
        assert_eq!(
            a.admit_forwarded(&mut two, ip("203.0.113.7")),
            Err(Refusal::MaxPerAddress)
        );
        assert_eq!(
            a.admit(ip("203.0.113.7")).err(),
            Some(Refusal::MaxPerAddress)
        );
        a.admit_forwarded(&mut two, ip("198.51.100.1")).unwrap();
        let _direct = a.admit(ip("10.0.0.1")).unwrap();
        let _three = a.admit_proxied().unwrap();
        assert_eq!(a.admit_proxied().err(), Some(Refusal::MaxConnections));
        drop(one);
        assert_eq!((a.open(), a.open_from(ip("203.0.113.7"))), (3, 0));
        drop(two);
        assert!(a.open.lock().unwrap().by_source.len() == 1);
    }

    #[test]
    fn trusted_proxies_are_addresses_or_blocks() {
        let t = TrustedProxies::new(
            ["127.0.0.1", "10.1.0.0/16", "2001:db8::/32"]
                .iter()
                .map(|b| b.parse().unwrap())
                .collect(),
        );
        for yes in [
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "10.1.255.3",
            "2001:db8:5::1",
        ] {
            assert!(t.contains(ip(yes)), "{yes}");
        }
        for no in ["127.0.0.2", "10.2.0.1", "2001:db9::1", "::1"] {
            assert!(!t.contains(ip(no)), "{no}");
        }
        assert!(TrustedProxies::default().is_empty());
        let all: Block = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("192.0.2.1")) && !all.contains(ip("2001:db8::1")));
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "localhost",
            "10.0.0.1/",
            "10.0.0.1:80",
        ] {
            assert!(bad.parse::<Block>().is_err(), "{bad}");
        }
    }

    #[test]
    fn caps_of_zero_mean_one() {
        let a = Admission::new(Caps {
            max_connections: 0,
            max_per_address: 0,
            max_new_per_second: 0,
        });
        assert_eq!(
            a.caps(),
            Caps {
                max_connections: 1,
                max_per_address: 1,
                max_new_per_second: 1,
            }
        );
        let _one = a.admit(ip("10.0.0.1")).unwrap();
    }

    /// An address may open a burst of `max_new_per_second` connections, then one per
    /// interval; another address is not held back; passed times are pruned.
    #[test]
    fn new_connections_are_limited_per_address_per_second() {
        let a = Admission::new(Caps {
            max_new_per_second: 4,
            ..Caps::default()
        });
        let t0 = Instant::now();
        for _ in 0..4 {
            drop(a.admit_at(ip("10.0.0.1"), t0).unwrap());
        }
        assert_eq!(
            a.admit_at(ip("10.0.0.1"), t0).err(),
            Some(Refusal::MaxNewPerSecond)
        );
        drop(a.admit_at(ip("10.0.0.2"), t0).unwrap());
        // One interval (250 ms) later, one more; not two.
        let t1 = t0 + Duration::from_millis(250);
        drop(a.admit_at(ip("10.0.0.1"), t1).unwrap());
        assert_eq!(
            a.admit_at(ip("10.0.0.1"), t1).err(),
            Some(Refusal::MaxNewPerSecond)
        );
        // A second later, a whole burst again; a refusal takes no slot.
        let t2 = t1 + Duration::from_secs(1);
        for _ in 0..4 {
            drop(a.admit_at(ip("10.0.0.1"), t2).unwrap());
        }
        assert_eq!(a.open(), 0);
        // Many addresses: the map is pruned of passed times and stays bounded.
        let t3 = t2 + Duration::from_secs(2);
        for i in 0..3 * PRUNE_FLOOR as u32 {
            let at = t3 + Duration::from_secs(u64::from(i));
            drop(
                a.admit_at(IpAddr::from((0x0b00_0000 + i).to_be_bytes()), at)
                    .unwrap(),
            );
        }
        assert!(a.open.lock().unwrap().arrivals.len() <= PRUNE_FLOOR);
    }
}
