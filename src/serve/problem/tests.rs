//! The error mapping table: every code that reaches a client has one status and one origin,
//! whichever error type and route produced it.

use std::collections::HashMap;
use std::time::Duration;

use http::StatusCode;

use super::samples::*;
use super::*;
use crate::fetch::failure::FetchCode;

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
    for e in package_failures() {
        rows.push((e.code.as_str(), e.origin(), Problem::from(e)));
    }
    for e in registry_errors() {
        rows.push((e.code(), e.origin(), Problem::from(e)));
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
    down.code = FetchCode::UpstreamStatus;
    let p = Problem::from(RegistryError::Upstream(down));
    assert_eq!(p.status, StatusCode::BAD_GATEWAY);
    assert_eq!(p.origin, Origin::Upstream);
}

/// The package managers fetchgate serves retry 408, 420, 429 and 5xx, or 500, 502, 503, 520 and
/// 527 (413, 429 and 503 with Retry-After), or 5xx and 429: content that can never verify
/// gets none of them.
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

/// The fetch path, the registries and the egress policy are used by people who have no LOVE
/// manifest: their problems point at what they do have (issue 36, item 8).
#[test]
fn problems_outside_love_and_packs_offer_no_love_or_manifest_hints() {
    let love_codes: std::collections::HashSet<&str> =
        package_failures().iter().map(|e| e.code.as_str()).collect();
    for (p, code, _) in table() {
        if love_codes.contains(code) || code.starts_with("oci_") || code == "missing_manifest" {
            continue;
        }
        assert!(!p.next.contains("LOVE"), "{code}: {}", p.next);
        assert!(!p.next.contains("the manifest"), "{code}: {}", p.next);
    }
}
