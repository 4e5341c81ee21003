//! The error mapping table: every code that reaches a client has one status and one origin,
//! whichever error type and route produced it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use http::{Method, StatusCode};

use super::*;
use crate::fetch::through::LocatorFailure;
use crate::registry::apt::{AptError, AptErrorKind};
use crate::store::Digest;

/// Every refusal reason (allowed ones excluded), by its serialized code.
const REFUSALS: &[&str] = &[
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

fn request_errors() -> Vec<RequestError> {
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

fn dial_errors() -> Vec<DialError> {
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

fn store_errors() -> Vec<StoreError> {
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
fn love_errors() -> Vec<LoveError> {
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
fn pack_errors() -> Vec<PackError> {
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
fn refused_upstream() -> LocatorFailure {
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
        code: "loopback_address",
        detail: "the address is a loopback address".into(),
        next: "n",
        refused: Some(Box::new(crate::decide::trust_hint::RefusedDestination::of(
            &refusal,
        ))),
    }
}

fn registry_errors() -> Vec<RegistryError> {
    let failure = |code| LocatorFailure {
        locator: "https://r.test/x".into(),
        hop: None,
        code,
        detail: "d".into(),
        next: "n",
        refused: None,
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
        RegistryError::Upstream(failure("upstream_timeout")),
        RegistryError::Upstream(failure("upstream_status")),
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
            failure: Box::new(failure("upstream_status")),
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
        RegistryError::Apt(AptError::new(
            AptErrorKind::NotInSignedIndex,
            "pool/main/x.deb",
            "d",
        )),
        RegistryError::Apt(AptError::new(
            AptErrorKind::KeyNotTrusted,
            "dists/stable/InRelease",
            "d",
        )),
        RegistryError::Apt(AptError::new(AptErrorKind::PathRefused, "path", "d")),
        RegistryError::Apt(AptError::new(AptErrorKind::NotServed, "path", "d")),
    ]
}

/// Each error converted, with the code and origin its own type reports.
fn table() -> Vec<(Problem, &'static str, Origin)> {
    let mut rows = Vec::new();
    for e in request_errors() {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    for e in [
        crate::access::host::HostRefused::Malformed("x".into()),
        crate::access::host::HostRefused::Foreign {
            host: "x".into(),
            accepted: vec!["localhost".into()],
        },
    ] {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    for e in [Denied::MissingToken, Denied::WrongToken] {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    for e in [CrossSite::FetchSite, CrossSite::Origin] {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    for e in [Full::Total(1), Full::PerClient(1)] {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    let mut upstream: Vec<UpstreamError> =
        dial_errors().into_iter().map(UpstreamError::Dial).collect();
    upstream.push(UpstreamError::HeadTimeout(Duration::from_secs(1)));
    upstream.push(UpstreamError::Http("reset".into()));
    upstream.push(UpstreamError::ContentCoding("gzip".into()));
    for e in &upstream {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    let mut through = vec![ThroughError::AllFailed(Vec::new())];
    through.extend(store_errors().into_iter().map(ThroughError::Store));
    for e in &through {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    for e in love_errors() {
        rows.push((e.code, e.origin(), Problem::from(e)));
    }
    for e in registry_errors() {
        rows.push((e.code(), e.origin(), Problem::from(e)));
    }
    for e in pack_errors() {
        rows.push((e.code, e.origin(), Problem::from(e)));
    }
    for code in REFUSALS {
        let reason: Reason = serde_json::from_value(json!(code)).expect("a reason code");
        assert!(!reason.allows(), "{code}");
        let refused = Refusal {
            target: None,
            verdict: crate::decide::Verdict {
                reason,
                rule: None,
                via: None,
            },
            detail: Some("x".into()),
            answers: Vec::new(),
            policy: None,
        };
        rows.push((
            reason.code(),
            Origin::Policy,
            refusal(&refused, "/x".into()),
        ));
    }
    rows.into_iter()
        .map(|(code, origin, p)| (p, code, origin))
        .collect()
}

#[test]
fn every_code_has_one_status_and_one_origin() {
    let mut seen: HashMap<&'static str, (StatusCode, Origin, String)> = HashMap::new();
    for (p, own_code, own_origin) in table() {
        // The HTTP code is the type's own, except the store's `cache_io`, which clients have
        // always seen as `cache_error`.
        let expected = if own_code == "cache_io" {
            "cache_error"
        } else {
            own_code
        };
        assert_eq!(p.code, expected, "{p:?}");
        assert_eq!(p.origin, own_origin, "{p:?}");
        assert_eq!(p.body()["code"], p.code);
        assert_eq!(p.body()["source"], own_origin.as_str(), "{p:?}");
        let this = (p.status, p.origin, p.detail.clone());
        if let Some(first) = seen.get(p.code) {
            assert_eq!(
                (first.0, first.1),
                (this.0, this.1),
                "{} maps to two statuses or origins: {:?} and {:?}",
                p.code,
                first,
                this
            );
        } else {
            seen.insert(p.code, this);
        }
    }
    assert!(seen.len() > 80, "{} codes", seen.len());
}

#[test]
fn refusals_are_403_and_every_problem_says_what_to_do() {
    for (p, _, _) in table() {
        if p.origin == Origin::Policy {
            assert_eq!(p.status, StatusCode::FORBIDDEN, "{}", p.code);
        }
        assert!(!p.next.is_empty(), "{} has no next action", p.code);
        assert!(
            !p.next.contains("disable"),
            "{} suggests disabling something",
            p.code
        );
    }
}

#[test]
fn a_refused_registry_upstream_is_policy_and_names_the_trust_rule() {
    let p = Problem::from(RegistryError::Upstream(refused_upstream()));
    assert_eq!(p.status, StatusCode::FORBIDDEN);
    assert_eq!(p.code, "registry_upstream_refused");
    assert_eq!(p.origin, Origin::Policy);
    assert!(
        p.detail.contains("127.0.0.2 port 4873 (loopback_address)"),
        "{}",
        p.detail
    );
    assert!(!p.next.contains("retry"), "{}", p.next);
    assert!(
        p.next
            .contains("[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [4873]"),
        "{}",
        p.next
    );
    let body = p.body();
    assert_eq!(body["refused"]["addresses"][0], "127.0.0.2");
    assert_eq!(body["refused"]["port"], 4873);
    assert_eq!(body["refused"]["reason"], "loopback_address");
    // The snippet is TOML an operator can paste.
    let rule: toml::Table = toml::from_str(body["trust_rule"].as_str().unwrap()).unwrap();
    assert_eq!(
        rule["egress"]["trust"][0]["ports"][0].as_integer(),
        Some(4873)
    );
    // An upstream that failed for any other reason stays an upstream outage.
    let mut down = refused_upstream();
    down.refused = None;
    down.code = "upstream_status";
    let p = Problem::from(RegistryError::Upstream(down));
    assert_eq!(p.status, StatusCode::BAD_GATEWAY);
    assert_eq!(p.origin, Origin::Upstream);
}

/// npm retries 408, 420, 429 and 5xx, pip 500, 502, 503, 520 and 527 (413, 429 and 503 with
/// Retry-After), cargo 5xx and 429: content that can never verify gets none of them.
#[test]
fn permanent_upstream_content_failures_use_a_status_no_client_retries() {
    let retried_by_some_client = |s: u16| matches!(s, 408 | 413 | 420 | 429) || s >= 500;
    let mut permanent = 0;
    for e in registry_errors() {
        let p = Problem::from(e);
        if matches!(
            p.code,
            "digest_mismatch" | "registry_metadata_invalid" | "no_published_digest"
        ) {
            permanent += 1;
            assert!(
                !retried_by_some_client(p.status.as_u16()),
                "{} is {}",
                p.code,
                p.status
            );
            assert_eq!(p.status, StatusCode::FAILED_DEPENDENCY, "{}", p.code);
        } else if p.code == "registry_upstream_failed" {
            assert_eq!(p.status, StatusCode::BAD_GATEWAY, "outages stay 502");
        }
    }
    assert_eq!(permanent, 3);
}
