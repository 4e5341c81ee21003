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

/// Every LOVE code with the status its call site gives it.
pub(super) fn love_errors() -> Vec<LoveError> {
    [
        ("manifest_invalid", 400),
        ("index_invalid", 400),
        ("discovery_invalid", 400),
        ("unsupported_protocol", 400),
        ("wrong_document_type", 400),
        ("too_many_mirrors", 400),
        ("lock_invalid", 400),
        ("invalid_locator", 403),
        ("lock_conflict", 409),
        ("pin_mismatch", 409),
        ("digest_conflict", 409),
        ("engine_incompatible", 422),
        ("archive_cap_exceeded", 422),
        ("archive_malformed", 422),
        ("package_json_missing", 422),
        ("package_json_invalid", 422),
        ("package_identity_mismatch", 422),
        ("all_mirrors_failed", 502),
        ("discovery_unavailable", 502),
        ("index_unavailable", 502),
        ("manifest_unavailable", 502),
        ("love_busy", 503),
        ("internal_error", 500),
    ]
    .into_iter()
    .map(|(code, status)| LoveError::new(code, status, "detail", "next"))
    .chain(store_errors().iter().map(LoveError::store))
    .collect()
}

/// Every code a pack profile raises, with the status it raises it with, and what the shared
/// archive reader's refusals become.
pub(super) fn pack_errors() -> Vec<PackError> {
    let mut out: Vec<PackError> = [
        ("pack_request_invalid", 400),
        ("pack_format_unknown", 400),
        ("manifest_invalid", 400),
        ("pin_mismatch", 409),
        ("digest_conflict", 409),
        ("pack_version_not_found", 404),
        ("engine_incompatible", 422),
        ("archive_cap_exceeded", 422),
        ("pack_busy", 503),
        ("internal_error", 500),
        ("all_mirrors_failed", 502),
        ("manifest_unavailable", 502),
        ("depot_unavailable", 502),
        ("registry_unavailable", 502),
        ("pack_artifact_unavailable", 502),
    ]
    .into_iter()
    .map(|(code, status)| PackError::new(code, status, "detail", "next"))
    .collect();
    for code in [
        "pack_integrity_failure",
        "pack_signature_invalid",
        "pack_engine_unsupported",
        "pack_validation_failed",
        "pack_build_record_missing",
        "pack_withdrawn",
        "pack_hidden_character",
        "pack_text_encoding",
        "pack_credential_found",
        "pack_identity_mismatch",
        "pack_manifest_invalid",
        "pack_layout_invalid",
        "pack_path_refused",
        "pack_key_revoked",
        "pack_untrusted",
        "pack_registry_invalid",
        "archive_malformed",
    ] {
        out.push(PackError::refused(code, "archive:x", "detail"));
    }
    out.extend(store_errors().iter().map(PackError::store));
    out
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
