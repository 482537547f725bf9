//! Where a validator may send requests. An agent advertises its own endpoint, so without
//! checks a validator would fetch any URL an attacker names: a port scanner and a reader of
//! services inside the validator's network (SSRF). An endpoint must be a bare `http(s)` origin
//! (no credentials, query or fragment; a path prefix at most) whose host resolves to public
//! addresses only; loopback, private, link-local and other special ranges need
//! `--allow-private-endpoints` (tests and private deployments). The addresses are checked
//! when the name is resolved for each connection ([`PublicResolver`]), so a name that
//! resolves to a public address at registration and to an internal one later (DNS
//! rebinding) is refused all the same.

use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why an endpoint is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The text does not parse as a URL.
    #[error("endpoint {0:?} is not a URL")]
    NotAUrl(String),
    /// The scheme is neither `http` nor `https`.
    #[error("endpoint {0:?}: only http and https are served")]
    Scheme(String),
    /// The URL carries credentials, a query or a fragment.
    #[error("endpoint {0:?}: credentials, queries and fragments are not allowed")]
    Extras(String),
    /// The URL names no host.
    #[error("endpoint {0:?} has no host")]
    NoHost(String),
    /// The host is, or resolves to, a non-public address and private endpoints are not allowed.
    #[error("endpoint {url:?}: {ip} is not a public address (a validator may not be sent inside its own network)")]
    NotPublic {
        /// The endpoint.
        url: String,
        /// The special-range address it names or resolves to.
        ip: IpAddr,
    },
    /// The endpoint is longer than [`MAX_ENDPOINT_BYTES`].
    #[error("endpoint {0:?} is longer than {MAX_ENDPOINT_BYTES} bytes")]
    TooLong(String),
}

/// The longest endpoint accepted.
pub const MAX_ENDPOINT_BYTES: usize = 512;

/// Checks an advertised endpoint and returns it normalized (no trailing slash).
pub fn validate(endpoint: &str, allow_private: bool) -> Result<String, EndpointError> {
    if endpoint.len() > MAX_ENDPOINT_BYTES {
        return Err(EndpointError::TooLong(endpoint.chars().take(64).collect()));
    }
    let url = Url::parse(endpoint).map_err(|_| EndpointError::NotAUrl(endpoint.into()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(EndpointError::Scheme(endpoint.into()));
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || endpoint.contains(['?', '#'])
    {
        return Err(EndpointError::Extras(endpoint.into()));
    }
    let ip = match url.host() {
        None => return Err(EndpointError::NoHost(endpoint.into())),
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(url::Host::Domain(_)) => None, // checked when resolved, at every connection
    };
    if let Some(ip) = ip {
        if !allow_private && !is_public(ip) {
            return Err(EndpointError::NotPublic {
                url: endpoint.into(),
                ip,
            });
        }
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// Whether `ip` is an address on the public internet: not loopback, private (RFC 1918, ULA),
/// link-local, shared (CGNAT), unspecified, multicast, broadcast, documentation or
/// benchmarking space, nor an IPv4 address hidden in an IPv6 one.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64 (an IPv4 address inside)
                || s[0] == 0x2002 // 6to4 (an IPv4 address inside)
                || (s[0] == 0x2001 && s[1] == 0) // Teredo (an IPv4 address inside)
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated, still routed inside)
                || s[..6] == [0; 6] // IPv4-compatible ::a.b.c.d
                || v6 == Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 1))
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // shared address space (CGNAT)
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || o[0] >= 240) // reserved
}

/// The validator's name resolver: the system's, keeping only public addresses unless private
/// ones are allowed. A name with none left fails to resolve, so no connection is made.
#[derive(Debug, Clone, Copy)]
pub struct PublicResolver {
    /// Keep loopback, private and other special addresses too (`--allow-private-endpoints`).
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if found.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_http_origins_pass_and_are_normalized() {
        assert_eq!(
            validate("https://8.8.8.8:7070/", false).unwrap(),
            "https://8.8.8.8:7070"
        );
        assert_eq!(
            validate("http://agent.example.org:7070/pog", false).unwrap(),
            "http://agent.example.org:7070/pog"
        );
    }

    #[test]
    fn internal_addresses_and_url_tricks_are_refused() {
        for bad in [
            "http://127.0.0.1:7070",
            "http://[::1]:7070",
            "http://10.0.0.5",
            "http://172.16.3.4",
            "http://192.168.1.1",
            "http://169.254.169.254/latest/meta-data", // cloud metadata
            "http://100.64.0.1",
            "http://0.0.0.0:22",
            "http://[::ffff:127.0.0.1]",
            "http://[fd00::1]",
            "http://[fe80::1]",
            "http://[2002:7f00:1::1]",      // 6to4 around 127.0.0.1
            "http://[2001:0:4136:e378::1]", // Teredo
            "http://[::127.0.0.1]",         // IPv4-compatible
            "http://[fec0::1]",
            "http://2130706433", // 127.0.0.1 as one number
        ] {
            assert!(
                matches!(validate(bad, false), Err(EndpointError::NotPublic { .. })),
                "{bad}: {:?}",
                validate(bad, false)
            );
        }
        assert!(
            validate("http://127.0.0.1:7070", true).is_ok(),
            "allowed when asked"
        );
        for bad in [
            "http://8.8.8.8/x?y=1",
            "http://8.8.8.8/#frag",
            "http://user:pw@8.8.8.8",
            "http://8.8.8.8/?",
        ] {
            assert!(
                matches!(validate(bad, false), Err(EndpointError::Extras(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            validate("ftp://8.8.8.8", false),
            Err(EndpointError::Scheme(_))
        ));
        assert!(matches!(
            validate("file:///etc/passwd", false),
            Err(EndpointError::Scheme(_))
        ));
        assert!(matches!(
            validate("not a url", false),
            Err(EndpointError::NotAUrl(_))
        ));
        let long = format!("http://{}.example.org", "a".repeat(600));
        assert!(matches!(
            validate(&long, false),
            Err(EndpointError::TooLong(_))
        ));
    }

    #[tokio::test]
    async fn the_resolver_drops_internal_addresses() {
        use reqwest::dns::Resolve;
        let strict = PublicResolver {
            allow_private: false,
        };
        let name = || "localhost".parse::<reqwest::dns::Name>().unwrap();
        assert!(strict.resolve(name()).await.is_err());
        let lax = PublicResolver {
            allow_private: true,
        };
        assert!(lax.resolve(name()).await.is_ok());
    }
}
