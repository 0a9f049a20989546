//! The client's address: the TCP peer, or, when the peer is a trusted proxy
//! (`--trusted-proxies`), the rightmost untrusted entry of `X-Forwarded-For`.
//!
//! Each proxy appends the address it received the request from, so the entries right of the
//! last trusted hop were written by proxies we trust and everything left of it by the client.
//! Walking from the right and stopping at the first address we do not trust gives the client
//! as our own proxies saw it; whatever a client puts on the left is never believed. An entry
//! that is not an address (`unknown`, an obfuscated name, garbage) ends the walk at the
//! trusted hop that passed it on. If every entry is trusted, the leftmost one is the client.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Hops walked at most; a real chain has a handful (the header itself is bounded by the
/// server's 64 KiB header limit).
const MAX_HOPS: usize = 64;

/// The networks whose `X-Forwarded-For` the gateway believes. Empty (the default): none, the
/// header is ignored and the TCP peer is the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl FromStr for TrustedProxies {
    type Err = String;

    /// `CIDR[,CIDR...]`; a bare address means just that address. Spaces are ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut nets = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let net = match item.parse::<IpNet>() {
                Ok(n) => n,
                Err(_) => match item.parse::<IpAddr>() {
                    Ok(a) => IpNet::from(a),
                    Err(_) => {
                        return Err(format!("`{item}` is not an address or a CIDR network (e.g. 10.0.0.0/8, ::1)"));
                    }
                },
            };
            nets.push(canonical_net(net));
        }
        Ok(TrustedProxies(nets))
    }
}

/// IPv4-mapped IPv6 networks (`::ffff:10.0.0.0/104`) as IPv4, the form peers are compared in.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(n) => match n.addr().to_ipv4_mapped() {
            Some(v4) if n.prefix_len() >= 96 => {
                ipnet::Ipv4Net::new(v4, n.prefix_len() - 96).map(IpNet::V4).unwrap_or(net)
            }
            _ => net,
        },
        v4 => v4,
    }
}

impl TrustedProxies {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client's address for a request that came from `peer` with `headers`.
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.trusts(client) {
            return client;
        }
        // Several header lines are one list in order (RFC 9110 §5.3): walk the last line
        // first, each line from its right end.
        let mut hops = 0;
        for line in headers.get_all("x-forwarded-for").iter().rev() {
            let Ok(line) = line.to_str() else { return client };
            for item in line.rsplit(',').map(str::trim).filter(|i| !i.is_empty()) {
                hops += 1;
                if hops > MAX_HOPS {
                    return client;
                }
                let Some(ip) = parse_entry(item) else { return client };
                client = ip.to_canonical();
                if !self.trusts(client) {
                    return client;
                }
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: `192.0.2.1`, `192.0.2.1:5678`, `2001:db8::1`, `[2001:db8::1]`
/// or `[2001:db8::1]:443`. Anything else (`unknown`, `_hidden`, zone ids) is not an address.
fn parse_entry(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

/// What the sign-in throttle counts as one client: an IPv4 address, or an IPv6 /64 (one
/// subscriber's network: a client can pick any of its 2^64 addresses at will).
pub fn client_key(ip: Option<IpAddr>) -> String {
    match ip.map(|i| i.to_canonical()) {
        Some(IpAddr::V4(a)) => a.to_string(),
        Some(IpAddr::V6(a)) => format!("{}/64", Ipv6Addr::from(u128::from(a) & (u128::MAX << 64))),
        None => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append("x-forwarded-for", HeaderValue::from_str(l).expect("header"));
        }
        h
    }

    fn trusted(s: &str) -> TrustedProxies {
        s.parse().expect("trusted proxies")
    }

    #[test]
    fn parses_lists_of_networks_and_addresses() {
        let t = trusted(" 10.0.0.0/8, 127.0.0.1 ,::1,fd00::/8,");
        assert!(t.trusts(ip("10.9.8.7")) && t.trusts(ip("127.0.0.1")) && t.trusts(ip("::1")));
        assert!(t.trusts(ip("fd12::3")) && t.trusts(ip("::ffff:10.1.1.1")), "IPv4-mapped peers match IPv4 nets");
        assert!(!t.trusts(ip("127.0.0.2")) && !t.trusts(ip("11.0.0.1")) && !t.trusts(ip("fe80::1")));
        assert!(trusted("").is_empty() && trusted(" , ").is_empty());
        assert!(trusted("::ffff:192.168.0.0/112").trusts(ip("192.168.3.4")));
        for bad in ["10.0.0.0/33", "localhost", "10.0.0.0/8;", "1.2.3.4:80", "*"] {
            assert!(bad.parse::<TrustedProxies>().is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn untrusted_peers_are_the_client_whatever_they_send() {
        let t = trusted("10.0.0.0/8");
        let h = headers(&["198.51.100.7"]);
        assert_eq!(t.client_address(ip("203.0.113.9"), &h), ip("203.0.113.9"));
        assert_eq!(TrustedProxies::default().client_address(ip("10.0.0.1"), &h), ip("10.0.0.1"));
        assert_eq!(t.client_address(ip("::ffff:203.0.113.9"), &h), ip("203.0.113.9"));
    }

    #[test]
    fn the_rightmost_untrusted_entry_is_the_client() {
        let t = trusted("10.0.0.0/8, 127.0.0.1");
        let peer = ip("127.0.0.1");
        let c = |lines: &[&str]| t.client_address(peer, &headers(lines));
        // A client's own leftmost claim is never believed.
        assert_eq!(c(&["1.1.1.1, 198.51.100.7"]), ip("198.51.100.7"));
        assert_eq!(c(&["1.1.1.1, 198.51.100.7, 10.2.3.4"]), ip("198.51.100.7"));
        // Several lines are one list, in order; spaces and empty items do not matter.
        assert_eq!(c(&["1.1.1.1", " 198.51.100.7 ,, 10.0.0.5 "]), ip("198.51.100.7"));
        assert_eq!(c(&["198.51.100.7", "10.0.0.5", ""]), ip("198.51.100.7"));
        // Ports and brackets.
        assert_eq!(c(&["198.51.100.7:5555"]), ip("198.51.100.7"));
        assert_eq!(c(&["[2001:db8::7]:443"]), ip("2001:db8::7"));
        assert_eq!(c(&["[2001:db8::7]"]), ip("2001:db8::7"));
        assert_eq!(c(&["2001:db8::7"]), ip("2001:db8::7"));
        assert_eq!(c(&["::ffff:198.51.100.7"]), ip("198.51.100.7"));
        // No header, or only trusted hops: the leftmost trusted address.
        assert_eq!(c(&[]), peer);
        assert_eq!(c(&["10.1.1.1, 10.2.2.2"]), ip("10.1.1.1"));
        // Garbage stops the walk at the trusted hop that passed it on.
        assert_eq!(c(&["unknown"]), peer);
        assert_eq!(c(&["198.51.100.7, _hidden, 10.3.3.3"]), ip("10.3.3.3"));
        assert_eq!(c(&["198.51.100.7, fe80::1%eth0"]), peer);
        assert_eq!(c(&["999.1.1.1"]), peer);
        // ... but garbage left of the client is the client's own business.
        assert_eq!(c(&["<script>, 198.51.100.7"]), ip("198.51.100.7"));
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", HeaderValue::from_bytes(b"198.51.100.7, \xff").expect("opaque bytes"));
        assert_eq!(t.client_address(peer, &h), peer, "a line that is not text is not believed");
        // A very long chain of trusted hops stops after MAX_HOPS.
        let long = vec!["10.0.0.1"; 200].join(",");
        assert_eq!(c(&[&format!("198.51.100.7,{long}")]), ip("10.0.0.1"));
    }

    #[test]
    fn throttle_keys_are_addresses_and_ipv6_slash_64s() {
        assert_eq!(client_key(Some(ip("203.0.113.9"))), "203.0.113.9");
        assert_eq!(client_key(Some(ip("::ffff:203.0.113.9"))), "203.0.113.9");
        assert_eq!(client_key(Some(ip("2001:db8:1:2:aaaa::1"))), "2001:db8:1:2::/64");
        assert_eq!(client_key(Some(ip("2001:db8:1:2:ffff::9"))), client_key(Some(ip("2001:db8:1:2::1"))));
        assert_ne!(client_key(Some(ip("2001:db8:1:3::1"))), client_key(Some(ip("2001:db8:1:2::1"))));
        assert_eq!(client_key(None), "unknown");
    }
}
