//! One sample of every error type that becomes a problem, for the mapping table's tests.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use http::Method;

use super::*;
use crate::fetch::failure::{FetchCode, LocatorFailure};
use crate::registry::error::KindError;
use crate::store::Digest;

/// Every refusal reason (allowed ones excluded), by its serialized code.
pub(super) const REFUSALS: &[&str] = &[
    "invalid_locator",
    "scheme_not_allowed",
    "userinfo_present",
    "fragment_present",
    "forbidden_character",
    "invalid_port",
    "port_not_allowed",
    "zone_id_present",
    "invalid_host",
    "localhost_name",
    "special_use_name",
    "metadata_name",
    "operator_denied",
    "unspecified_address",
    "private_address",
    "shared_address",
    "loopback_address",
    "link_local_address",
    "special_purpose_address",
    "documentation_address",
    "benchmarking_address",
    "reserved_address",
    "multicast_address",
    "broadcast_address",
    "unique_local_address",
    "site_local_address",
    "metadata_address",
    "ipv4_mapped_address",
    "ipv4_compatible_address",
    "dns_nxdomain",
    "dns_no_answer",
    "dns_timeout",
    "dns_failure",
    "answer_refused",
    "policy_host_not_allowed",
    "policy_port_not_allowed",
    "policy_registry_not_allowed",
    "policy_fetch_not_allowed",
];

pub(super) fn request_errors() -> Vec<RequestError> {
    use RequestError::*;
    let d = Digest([7; 32]);
    vec![
        HeaderTooLarge { size: 9, limit: 8 },
        ClientNotAllowed(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))),
        NotFound {
            locator: "/x".into(),
        },
        NotLoveEndpoint("/love/v1/x".into()),
        MethodNotForwarded {
            method: Method::POST,
            allow: "GET, HEAD".into(),
        },
        MethodOnObject(Method::POST),
        MethodOnLove,
        MethodOnRegistry(Method::PUT),
        MissingAuthority,
        InvalidRequest("path".into()),
        InvalidDigest {
            field: "sha256",
            detail: "short".into(),
        },
        InvalidDigest {
            field: "pin",
            detail: "short".into(),
        },
        InvalidSize,
        SizeMismatch {
            digest: d,
            claimed: 1,
            stored: 2,
        },
        TooManyMirrors,
        MissingSize,
        SizeTooLarge {
            size: 2,
            digest: d,
            max: 1,
        },
        InvalidEngine,
        MissingManifest,
        InvalidHostHeader,
        NotInCache(d),
        Evicted(d),
        RangeNotSatisfiable { size: 3 },
        SelfTunnel {
            authority: "127.0.0.1:4873".into(),
        },
        InterceptMisdirected {
            tunnel: "registry.npmjs.org:443".into(),
            named: "other.example:443".into(),
        },
        AdminNotProxied {
            locator: "http://127.0.0.1:9128/metrics".into(),
        },
    ]
}

pub(super) fn dial_errors() -> Vec<DialError> {
    let addr = SocketAddr::from(([192, 0, 2, 1], 443));
    vec![
        DialError::Unreachable {
            attempts: vec![(addr, "refused".into())],
            timed_out: false,
        },
        DialError::Unreachable {
            attempts: vec![(addr, "late".into())],
            timed_out: true,
        },
        DialError::PeerMismatch {
            expected: addr,
            got: None,
        },
        DialError::Tls {
            addr,
            error: "bad certificate".into(),
        },
        DialError::NoAddress,
    ]
}

pub(super) fn store_errors() -> Vec<StoreError> {
    vec![
        StoreError::Full {
            needed: 2,
            limit: 1,
        },
        StoreError::Io {
            what: "cannot create",
            path: PathBuf::from("/c"),
            source: "denied".into(),
        },
        StoreError::Index("index.redb".into()),
        StoreError::Writer("the cache writer stopped"),
        StoreError::poisoned("entry table"),
    ]
}

/// Every package consumer failure (LOVE's, the format profiles', the archive reader's), and
/// what a store failure becomes in each consumer's report.
pub(super) fn package_failures() -> Vec<Failure> {
    crate::failure::FailureCode::ALL
        .into_iter()
        .map(|code| Failure::new(code, "detail", "next"))
        .chain(store_errors().iter().map(Failure::store))
        .collect()
}

/// The failure of a registry upstream on 127.0.0.2:4873 that the profile refuses.
pub(super) fn refused_upstream() -> LocatorFailure {
    let ip: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let verdict = crate::decide::Verdict {
        reason: Reason::LoopbackAddress,
        rule: None,
        via: None,
    };
    let refusal = Refusal {
        target: Some(crate::decide::Target {
            kind: crate::decide::RequestKind::Http,
            host: crate::decide::Host::Ip(ip),
            port: 4873,
        }),
        verdict,
        detail: None,
        answers: vec![(ip, verdict)],
        policy: None,
    };
    LocatorFailure {
        locator: "http://127.0.0.2:4873/".into(),
        hop: None,
        code: FetchCode::Refused(crate::decide::Reason::LoopbackAddress),
        detail: "the address is a loopback address".into(),
        next: "n",
        refused: Some(Box::new(crate::decide::trust_hint::RefusedDestination::of(
            &refusal,
        ))),
        cause: None,
    }
}

pub(super) fn registry_errors() -> Vec<RegistryError> {
    let failure = |code| LocatorFailure {
        locator: "https://r.test/x".into(),
        hop: None,
        code,
        detail: "d".into(),
        next: "n",
        refused: None,
        cause: None,
    };
    vec![
        RegistryError::UnknownRegistry("x".into()),
        RegistryError::NotServed("/x".into()),
        RegistryError::NotFound("x".into()),
        RegistryError::NameRefused {
            name: "x".into(),
            list: "deny",
            pattern: Some("x*".into()),
        },
        RegistryError::OfflineMiss("x".into()),
        RegistryError::Upstream(failure(FetchCode::UpstreamTimeout)),
        RegistryError::Upstream(failure(FetchCode::UpstreamStatus)),
        RegistryError::Upstream(refused_upstream()),
        RegistryError::BadMetadata("x".into()),
        RegistryError::MetadataTooLarge {
            path: "x".into(),
            limit: 1,
        },
        RegistryError::MetadataTooStale {
            path: "x".into(),
            age: 2,
            max_stale: 1,
            failure: Box::new(failure(FetchCode::UpstreamStatus)),
        },
        RegistryError::NoDigest {
            package: "x@1".into(),
        },
        RegistryError::DigestMismatch {
            package: "x".into(),
            version: "1".into(),
            expected: "a".into(),
            received: "b".into(),
        },
        RegistryError::Cache("x".into()),
        RegistryError::Internal("a task panicked".into()),
        RegistryError::kind(SampleKindError::Refused),
        RegistryError::kind(SampleKindError::Unverified),
    ]
}

/// A kind's own failure, as any kind reports one: the table maps it through its trait alone.
#[derive(Debug)]
enum SampleKindError {
    Refused,
    Unverified,
}

impl std::fmt::Display for SampleKindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for SampleKindError {}

impl KindError for SampleKindError {
    fn code(&self) -> &'static str {
        match self {
            SampleKindError::Refused => "sample_path_refused",
            SampleKindError::Unverified => "sample_not_verified",
        }
    }
    fn status(&self) -> u16 {
        match self {
            SampleKindError::Refused => 400,
            SampleKindError::Unverified => 424,
        }
    }
    fn origin(&self) -> Origin {
        match self {
            SampleKindError::Refused => Origin::Downstream,
            SampleKindError::Unverified => Origin::Upstream,
        }
    }
    fn field(&self) -> Option<std::borrow::Cow<'static, str>> {
        Some("path".into())
    }
    fn next(&self) -> &'static str {
        "check the path"
    }
}
