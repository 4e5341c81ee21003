//! Reason codes: the stable, snake_case vocabulary of every egress decision.
//!
//! Scripts, dashboards and error bodies match on these codes, so they never change meaning.
//! Each code also carries a one-line explanation and a safe next action for people.

use serde::{Deserialize, Serialize};

/// Why a destination was allowed or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Allowed: the address is globally reachable and the port is allowed.
    GlobalAddress,
    /// Allowed: an operator `[[egress.trust]]` rule covers this address, port and host.
    Trusted,

    /// The locator could not be parsed as an absolute URL or `host:port` authority.
    InvalidLocator,
    /// The scheme is not `http` or `https`.
    SchemeNotAllowed,
    /// The locator carries userinfo (`user:pass@`, or an empty `@`).
    UserinfoPresent,
    /// The locator carries a fragment (`#...`, or an empty `#`).
    FragmentPresent,
    /// The locator contains a backslash, a control character or whitespace.
    ForbiddenCharacter,
    /// The port is not a number from 1 to 65535.
    InvalidPort,
    /// The port is not in the allowed set for this kind of request.
    PortNotAllowed,
    /// An IPv6 literal carries a zone identifier (`%eth0`).
    ZoneIdPresent,
    /// The host name is not a valid DNS name.
    InvalidHost,

    /// `localhost` or a name under it.
    LocalhostName,
    /// A special-use or private namespace that never resolves globally.
    SpecialUseName,
    /// A cloud metadata service name.
    MetadataName,
    /// An operator `[[egress.deny]]` rule matched.
    OperatorDenied,

    /// `0.0.0.0/8`, `::` and friends.
    UnspecifiedAddress,
    /// RFC 1918 private-use space.
    PrivateAddress,
    /// RFC 6598 shared address space (carrier-grade NAT).
    SharedAddress,
    /// Loopback.
    LoopbackAddress,
    /// Link-local.
    LinkLocalAddress,
    /// IETF protocol assignments and other special-purpose blocks that are not global.
    SpecialPurposeAddress,
    /// Documentation ranges.
    DocumentationAddress,
    /// Benchmarking ranges.
    BenchmarkingAddress,
    /// Reserved or deprecated space.
    ReservedAddress,
    /// Multicast.
    MulticastAddress,
    /// Limited broadcast.
    BroadcastAddress,
    /// IPv6 unique-local (`fc00::/7`).
    UniqueLocalAddress,
    /// Deprecated IPv6 site-local (`fec0::/10`).
    SiteLocalAddress,
    /// A cloud metadata address; no trust rule can allow it.
    MetadataAddress,
    /// An IPv4-mapped IPv6 address (`::ffff:0:0/96`), not globally reachable as such.
    Ipv4MappedAddress,
    /// A deprecated IPv4-compatible IPv6 address (`::/96`).
    Ipv4CompatibleAddress,

    /// The name does not exist (NXDOMAIN).
    DnsNxdomain,
    /// The name exists but has no A or AAAA records.
    DnsNoAnswer,
    /// The resolver did not answer in time.
    DnsTimeout,
    /// The resolver failed for another reason.
    DnsFailure,
    /// At least one DNS answer is refused, so the whole destination is.
    AnswerRefused,

    /// The client's `[[access.policy]]` does not list this host.
    PolicyHostNotAllowed,
    /// The client's `[[access.policy]]` does not list this port.
    PolicyPortNotAllowed,
    /// The client's `[[access.policy]]` does not list this registry.
    PolicyRegistryNotAllowed,
    /// The client's `[[access.policy]]` limits hosts or ports, which a fetch by URL (whose
    /// mirrors and redirects fetchgate follows itself) cannot be held to.
    PolicyFetchNotAllowed,
}

impl Reason {
    /// Every reason, in declaration order (the metrics preset refusals with zeros from it).
    pub(crate) const ALL: [Reason; 40] = [
        Reason::GlobalAddress,
        Reason::Trusted,
        Reason::InvalidLocator,
        Reason::SchemeNotAllowed,
        Reason::UserinfoPresent,
        Reason::FragmentPresent,
        Reason::ForbiddenCharacter,
        Reason::InvalidPort,
        Reason::PortNotAllowed,
        Reason::ZoneIdPresent,
        Reason::InvalidHost,
        Reason::LocalhostName,
        Reason::SpecialUseName,
        Reason::MetadataName,
        Reason::OperatorDenied,
        Reason::UnspecifiedAddress,
        Reason::PrivateAddress,
        Reason::SharedAddress,
        Reason::LoopbackAddress,
        Reason::LinkLocalAddress,
        Reason::SpecialPurposeAddress,
        Reason::DocumentationAddress,
        Reason::BenchmarkingAddress,
        Reason::ReservedAddress,
        Reason::MulticastAddress,
        Reason::BroadcastAddress,
        Reason::UniqueLocalAddress,
        Reason::SiteLocalAddress,
        Reason::MetadataAddress,
        Reason::Ipv4MappedAddress,
        Reason::Ipv4CompatibleAddress,
        Reason::DnsNxdomain,
        Reason::DnsNoAnswer,
        Reason::DnsTimeout,
        Reason::DnsFailure,
        Reason::AnswerRefused,
        Reason::PolicyHostNotAllowed,
        Reason::PolicyPortNotAllowed,
        Reason::PolicyRegistryNotAllowed,
        Reason::PolicyFetchNotAllowed,
    ];

    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        use Reason::*;
        match self {
            GlobalAddress => "global_address",
            Trusted => "trusted",
            InvalidLocator => "invalid_locator",
            SchemeNotAllowed => "scheme_not_allowed",
            UserinfoPresent => "userinfo_present",
            FragmentPresent => "fragment_present",
            ForbiddenCharacter => "forbidden_character",
            InvalidPort => "invalid_port",
            PortNotAllowed => "port_not_allowed",
            ZoneIdPresent => "zone_id_present",
            InvalidHost => "invalid_host",
            LocalhostName => "localhost_name",
            SpecialUseName => "special_use_name",
            MetadataName => "metadata_name",
            OperatorDenied => "operator_denied",
            UnspecifiedAddress => "unspecified_address",
            PrivateAddress => "private_address",
            SharedAddress => "shared_address",
            LoopbackAddress => "loopback_address",
            LinkLocalAddress => "link_local_address",
            SpecialPurposeAddress => "special_purpose_address",
            DocumentationAddress => "documentation_address",
            BenchmarkingAddress => "benchmarking_address",
            ReservedAddress => "reserved_address",
            MulticastAddress => "multicast_address",
            BroadcastAddress => "broadcast_address",
            UniqueLocalAddress => "unique_local_address",
            SiteLocalAddress => "site_local_address",
            MetadataAddress => "metadata_address",
            Ipv4MappedAddress => "ipv4_mapped_address",
            Ipv4CompatibleAddress => "ipv4_compatible_address",
            DnsNxdomain => "dns_nxdomain",
            DnsNoAnswer => "dns_no_answer",
            DnsTimeout => "dns_timeout",
            DnsFailure => "dns_failure",
            AnswerRefused => "answer_refused",
            PolicyHostNotAllowed => "policy_host_not_allowed",
            PolicyPortNotAllowed => "policy_port_not_allowed",
            PolicyRegistryNotAllowed => "policy_registry_not_allowed",
            PolicyFetchNotAllowed => "policy_fetch_not_allowed",
        }
    }

    /// True for the two reasons that allow a destination.
    pub(crate) fn allows(self) -> bool {
        matches!(self, Reason::GlobalAddress | Reason::Trusted)
    }

    /// True for reasons a profile `[[refuse]]` block may carry.
    pub(crate) fn is_address_class(self) -> bool {
        use Reason::*;
        matches!(
            self,
            UnspecifiedAddress
                | PrivateAddress
                | SharedAddress
                | LoopbackAddress
                | LinkLocalAddress
                | SpecialPurposeAddress
                | DocumentationAddress
                | BenchmarkingAddress
                | ReservedAddress
                | MulticastAddress
                | BroadcastAddress
                | UniqueLocalAddress
                | SiteLocalAddress
                | Ipv4MappedAddress
                | Ipv4CompatibleAddress
        )
    }

    /// True for reasons a profile `[[name]]` entry may carry.
    pub(crate) fn is_name_class(self) -> bool {
        matches!(
            self,
            Reason::LocalhostName | Reason::SpecialUseName | Reason::MetadataName
        )
    }

    /// One sentence saying what the code means.
    pub(crate) fn explanation(self) -> &'static str {
        use Reason::*;
        match self {
            GlobalAddress => "every address is globally reachable and the port is allowed",
            Trusted => "an operator [[egress.trust]] rule covers this address, port and host",
            InvalidLocator => "the locator is not an absolute http(s) URL or host:port authority",
            SchemeNotAllowed => "only http and https locators may be fetched",
            UserinfoPresent => "the locator carries userinfo (credentials before '@')",
            FragmentPresent => "the locator carries a fragment ('#')",
            ForbiddenCharacter => {
                "the locator contains a backslash, a control character or whitespace"
            }
            InvalidPort => "the port is not a number from 1 to 65535",
            PortNotAllowed => "the port is not in the allowed set for this kind of request",
            ZoneIdPresent => "IPv6 zone identifiers name a local interface and are refused",
            InvalidHost => "the host is not a valid DNS name or IP address",
            LocalhostName => "localhost names always mean this machine",
            SpecialUseName => "the name is in a special-use namespace that never resolves globally",
            MetadataName => "the name belongs to a cloud metadata service",
            OperatorDenied => "an operator [[egress.deny]] rule matches this destination",
            UnspecifiedAddress => "the address is an unspecified or 'this network' address",
            PrivateAddress => "the address is in private-use space",
            SharedAddress => "the address is in shared (carrier-grade NAT) space",
            LoopbackAddress => "the address is a loopback address",
            LinkLocalAddress => "the address is link-local",
            SpecialPurposeAddress => "the address is in a special-purpose block that is not global",
            DocumentationAddress => "the address is reserved for documentation",
            BenchmarkingAddress => "the address is reserved for benchmarking",
            ReservedAddress => "the address is in reserved or deprecated space",
            MulticastAddress => "the address is multicast",
            BroadcastAddress => "the address is the limited broadcast address",
            UniqueLocalAddress => "the address is IPv6 unique-local",
            SiteLocalAddress => "the address is deprecated IPv6 site-local",
            MetadataAddress => "the address is a cloud metadata destination",
            Ipv4MappedAddress => "IPv4-mapped IPv6 addresses are not globally reachable as such",
            Ipv4CompatibleAddress => "IPv4-compatible IPv6 addresses are deprecated",
            DnsNxdomain => "the name does not exist (NXDOMAIN)",
            DnsNoAnswer => "the name has no A or AAAA records",
            DnsTimeout => "the resolver did not answer in time",
            DnsFailure => "the resolver failed",
            AnswerRefused => "at least one DNS answer is refused, so the destination is refused",
            PolicyHostNotAllowed => "the client's [[access.policy]] does not list this host",
            PolicyPortNotAllowed => "the client's [[access.policy]] does not list this port",
            PolicyRegistryNotAllowed => {
                "the client's [[access.policy]] does not list this registry"
            }
            PolicyFetchNotAllowed => {
                "the client's [[access.policy]] limits hosts or ports, so it may not make fetchgate fetch by URL"
            }
        }
    }

    /// A safe next action for whoever sees this reason.
    pub(crate) fn next_action(self) -> &'static str {
        use Reason::*;
        match self {
            GlobalAddress | Trusted => "none",
            InvalidLocator | InvalidHost => {
                "check the locator: it must be an absolute http(s) URL such as https://host/path"
            }
            SchemeNotAllowed => "use an http or https mirror of the same artifact",
            UserinfoPresent => {
                "remove the credentials from the URL; fetchgate never sends URL credentials upstream"
            }
            FragmentPresent => "remove the '#...' fragment from the locator",
            ForbiddenCharacter => "percent-encode the character or correct the locator",
            InvalidPort | PortNotAllowed => {
                "use a mirror on an allowed port, or ask the operator for a scoped [[egress.trust]] rule naming this port"
            }
            ZoneIdPresent => "use a global address or a host name instead of a zoned IPv6 literal",
            MetadataName | MetadataAddress => {
                "cloud metadata destinations can never be reached through fetchgate; use a public mirror"
            }
            OperatorDenied => "use another mirror; the operator has denied this destination",
            DnsNxdomain | DnsNoAnswer => "check the host name, or use another mirror",
            DnsTimeout | DnsFailure => {
                "retry later or use another mirror; check [resolver] nameservers"
            }
            PolicyFetchNotAllowed => {
                "fetch through the proxy (HTTP_PROXY) or a registry instead, or ask the operator for a policy without hosts and ports limits"
            }
            PolicyHostNotAllowed | PolicyPortNotAllowed | PolicyRegistryNotAllowed => {
                "use a destination your policy lists, or ask the operator to add it to the [[access.policy]] named in `policy`"
            }
            _ => {
                "use a public mirror, or ask the operator for a scoped [[egress.trust]] rule naming this destination and port"
            }
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}
