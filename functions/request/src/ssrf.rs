//! The SSRF guard's address check: which resolved addresses a vendor call
//! may connect to.
//!
//! Request is a reusable HTTP caller (other teams send it their own calls),
//! so a URL or a redirect must not reach the cloud metadata endpoint
//! (169.254.169.254, `fd00:ec2::254`), the VPC or the machine itself, directly
//! or through an IPv4-translating address (NAT64, 6to4, Teredo). The check runs on the
//! addresses a name actually resolves to, inside reqwest's connector (a
//! [`GuardedResolver`] installed with `ClientBuilder::dns_resolver`), so DNS
//! rebinding between a check and the connection cannot slip past it; URLs
//! whose host is an address literal are checked by [`check_ip`] before the
//! call.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

pub use tributary_core::ports::NetworkAccess;

/// The kind of a non-public address, as named in refusals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressClass {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918, RFC 6598.
    Private,
    /// `fc00::/7` (RFC 4193).
    UniqueLocal,
    /// `169.254.0.0/16` (the metadata endpoint's range), `fe80::/10`.
    LinkLocal,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// Multicast and broadcast.
    Multicast,
    /// Documentation, benchmarking and reserved ranges (RFC 5737, 2544,
    /// 6890, `240.0.0.0/4`, `2001:db8::/32`).
    Reserved,
    /// A cloud metadata endpoint outside the link-local range: AWS's IPv6
    /// IMDS `fd00:ec2::254` (EC2 User Guide, "Instance metadata service
    /// endpoints") and Alibaba Cloud's `100.100.100.200`, which would
    /// otherwise be unique-local or shared (private) addresses.
    Metadata,
    /// An IPv6 address that carries an IPv4 one to a translator or tunnel:
    /// NAT64 `64:ff9b::/96` (RFC 6052) and `64:ff9b:1::/48` (RFC 8215),
    /// 6to4 `2002::/16` (RFC 3056), IPv4-translated `::ffff:0:0:0/96`
    /// (RFC 2765), Teredo `2001::/32` (RFC 4380). The IPv4 address inside
    /// cannot be checked against the translator's own view, so none pass.
    Translated,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::UniqueLocal => "unique-local",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Multicast => "multicast or broadcast",
            AddressClass::Reserved => "reserved",
            AddressClass::Metadata => "cloud metadata endpoint",
            AddressClass::Translated => "IPv4-translating (NAT64, 6to4, Teredo or IPv4-translated)",
        })
    }
}

/// The class of `ip` when it is not a public unicast address. IPv4-mapped
/// and IPv4-compatible IPv6 addresses (`::ffff:10.0.0.1`) are classed as the
/// IPv4 address they carry.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    Some(if ip == Ipv4Addr::new(100, 100, 100, 200) {
        AddressClass::Metadata
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if a == 0 {
        AddressClass::Unspecified
    } else if ip.is_multicast() || ip.is_broadcast() {
        AddressClass::Multicast
    } else if ip.is_documentation() || a >= 240 || (a == 198 && (18..20).contains(&b)) || (a == 192 && b == 0 && c == 0)
    {
        AddressClass::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let segments = ip.segments();
    let first = segments[0];
    Some(if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        AddressClass::Metadata
    } else if (first == 0x0064 && segments[1] == 0xff9b && (segments[2..6] == [0, 0, 0, 0] || segments[2] == 1))
        || first == 0x2002
        || (first == 0x2001 && segments[1] == 0)
        || segments[..6] == [0, 0, 0, 0, 0xffff, 0]
    {
        AddressClass::Translated
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if first & 0xfe00 == 0xfc00 {
        AddressClass::UniqueLocal
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if first == 0x2001 && ip.segments()[1] == 0x0db8 {
        AddressClass::Reserved
    } else if let Some(v4) = ip.to_ipv4() {
        // IPv4-compatible (deprecated) `::a.b.c.d`.
        return classify_v4(v4);
    } else {
        return None;
    })
}

/// An address the guard refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("host {host} resolves to {address}, a {class} address: refused by the SSRF guard{}", hint(*class))]
pub struct Refused {
    /// The host name (or address literal) of the URL.
    pub host: String,
    /// The refused address.
    pub address: IpAddr,
    /// Its class.
    pub class: AddressClass,
}

/// What the user can do about a refusal: loopback and private addresses
/// may be allowed in the spec; the others never.
fn hint(class: AddressClass) -> &'static str {
    match class {
        AddressClass::Loopback => " (allow it with request.allow.loopback only if the vendor really lives there)",
        AddressClass::Private | AddressClass::UniqueLocal => {
            " (allow it with request.allow.private only if the vendor really lives there)"
        }
        _ => " (this class of address is never allowed)",
    }
}

/// Checks one address against `access`: public addresses pass; loopback
/// and private (unique-local included) pass when allowed; link-local
/// (metadata endpoint), unspecified, multicast and reserved never do.
///
/// # Errors
/// [`Refused`] naming `host`, the address and its class.
pub fn check_ip(host: &str, address: IpAddr, access: NetworkAccess) -> Result<(), Refused> {
    let allowed = match classify(address) {
        None => true,
        Some(AddressClass::Loopback) => access.loopback,
        Some(AddressClass::Private | AddressClass::UniqueLocal) => access.private,
        // Link-local, metadata, translated, unspecified, multicast, reserved.
        Some(_) => false,
    };
    if allowed {
        Ok(())
    } else {
        let class = classify(address).unwrap_or(AddressClass::Reserved);
        Err(Refused { host: host.to_string(), address, class })
    }
}

/// A boxed future of resolved addresses.
pub type LookupFuture = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;

/// Resolves a host name to addresses: the system resolver in production,
/// a fixed table in tests (so a test can make a name resolve to
/// 169.254.169.254 without touching DNS).
pub trait Lookup: Send + Sync {
    /// Addresses of `host`.
    fn lookup(&self, host: &str) -> LookupFuture;
}

/// The system resolver (`getaddrinfo` through tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_string();
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.map(|a| a.ip()).collect()) })
    }
}

/// A resolver for reqwest that keeps only the addresses `access` allows and
/// fails with [`Refused`] (reachable through the error's `source()` chain)
/// when none is left.
#[derive(Clone)]
pub struct GuardedResolver {
    /// The underlying lookup.
    pub lookup: Arc<dyn Lookup>,
    /// What may be reached.
    pub access: NetworkAccess,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let lookup = self.lookup.clone();
        let access = self.access;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses = lookup.lookup(&host).await?;
            let mut allowed = Vec::new();
            let mut first_refusal = None;
            for address in addresses {
                match check_ip(&host, address, access) {
                    Ok(()) => allowed.push(SocketAddr::new(address, 0)),
                    Err(refused) => {
                        tracing::warn!(host, %address, class = %refused.class, "SSRF guard refused an address");
                        first_refusal.get_or_insert(refused);
                    }
                }
            }
            if allowed.is_empty()
                && let Some(refused) = first_refusal
            {
                return Err(Box::new(refused) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The [`Refused`] somewhere in `err`'s source chain, if any.
pub fn find_refusal<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut current = Some(err);
    while let Some(err) = current {
        if let Some(refused) = err.downcast_ref::<Refused>() {
            return Some(refused);
        }
        current = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn classes_of_the_usual_suspects() {
        for (text, class) in [
            ("127.0.0.1", Some(AddressClass::Loopback)),
            ("::1", Some(AddressClass::Loopback)),
            ("10.1.2.3", Some(AddressClass::Private)),
            ("172.16.0.1", Some(AddressClass::Private)),
            ("192.168.1.1", Some(AddressClass::Private)),
            ("100.64.0.1", Some(AddressClass::Private)),
            ("169.254.169.254", Some(AddressClass::LinkLocal)),
            ("fe80::1", Some(AddressClass::LinkLocal)),
            ("fd00::1", Some(AddressClass::UniqueLocal)),
            ("0.0.0.0", Some(AddressClass::Unspecified)),
            ("::", Some(AddressClass::Unspecified)),
            ("224.0.0.1", Some(AddressClass::Multicast)),
            ("255.255.255.255", Some(AddressClass::Multicast)),
            ("192.0.2.1", Some(AddressClass::Reserved)),
            ("::ffff:169.254.169.254", Some(AddressClass::LinkLocal)),
            ("::ffff:10.0.0.1", Some(AddressClass::Private)),
            ("93.184.216.34", None),
            ("2606:4700::1111", None),
            ("172.32.0.1", None),
            ("100.100.100.200", Some(AddressClass::Metadata)),
            ("fd00:ec2::254", Some(AddressClass::Metadata)),
            ("64:ff9b::a9fe:a9fe", Some(AddressClass::Translated)),
            ("64:ff9b::5db8:d822", Some(AddressClass::Translated)),
            ("64:ff9b:1::a9fe:a9fe", Some(AddressClass::Translated)),
            ("2002:a9fe:a9fe::1", Some(AddressClass::Translated)),
            ("::ffff:0:a9fe:a9fe", Some(AddressClass::Translated)),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(AddressClass::Translated)),
            ("2001:4860:4860::8888", None),
        ] {
            assert_eq!(classify(ip(text)), class, "{text}");
        }
    }

    #[test]
    fn allowances_open_only_their_own_ranges() {
        let none = NetworkAccess::default();
        let loopback = NetworkAccess { loopback: true, private: false };
        let all = NetworkAccess { loopback: true, private: true };
        assert!(check_ip("h", ip("93.184.216.34"), none).is_ok());
        assert!(check_ip("h", ip("127.0.0.1"), none).is_err());
        assert!(check_ip("h", ip("127.0.0.1"), loopback).is_ok());
        assert!(check_ip("h", ip("10.0.0.1"), loopback).is_err());
        assert!(check_ip("h", ip("fd12::1"), all).is_ok());
        let refused = check_ip("metadata.internal", ip("169.254.169.254"), all).expect_err("never allowed");
        let text = refused.to_string();
        assert!(text.contains("metadata.internal") && text.contains("169.254.169.254") && text.contains("link-local"));
        assert!(text.contains("never allowed"), "no allowance can open the metadata endpoint: {text}");
        for never in ["fd00:ec2::254", "100.100.100.200", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "::ffff:0:7f00:1"] {
            let refused = check_ip("h", ip(never), all).expect_err(never);
            assert!(refused.to_string().contains("never allowed"), "{never}: {refused}");
        }
        let private = check_ip("h", ip("10.0.0.1"), none).expect_err("private").to_string();
        assert!(private.contains("request.allow.private"), "{private}");
    }

    struct Table;
    impl Lookup for Table {
        fn lookup(&self, host: &str) -> LookupFuture {
            let found = match host {
                "mixed.test" => vec![ip("10.0.0.7"), ip("93.184.216.34")],
                _ => vec![ip("10.0.0.7")],
            };
            Box::pin(async move { Ok(found) })
        }
    }

    #[tokio::test]
    async fn resolver_filters_and_refuses_with_a_findable_error() {
        use reqwest::dns::Resolve;
        let resolver = GuardedResolver { lookup: Arc::new(Table), access: NetworkAccess::default() };
        let addresses: Vec<SocketAddr> =
            resolver.resolve("mixed.test".parse().expect("name")).await.expect("one public address").collect();
        assert_eq!(addresses, [SocketAddr::new(ip("93.184.216.34"), 0)]);
        let Err(err) = resolver.resolve("internal.test".parse().expect("name")).await else { panic!("refused") };
        let refused = find_refusal(err.as_ref()).expect("a Refused in the chain");
        assert_eq!((refused.host.as_str(), refused.address), ("internal.test", ip("10.0.0.7")));
    }
}
