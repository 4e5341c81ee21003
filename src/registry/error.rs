//! Registry failures: each has a stable code, an HTTP status and where it came from; the one
//! conversion to a problem response lives in `serve/problem.rs`.

use std::borrow::Cow;
use std::sync::Arc;

use crate::errors::Origin;
use crate::fetch::failure::{FetchCode, LocatorFailure};

/// The status of upstream content that can never verify (a digest mismatch, metadata that
/// does not parse, no published digest): `424 Failed Dependency` (RFC 4918 §11.4: the
/// response depended on another action, the upstream's, and it failed). npm retries 408, 420,
/// 429 and 5xx (make-fetch-happen), pip 500, 502, 503, 520 and 527 (and 413, 429, 503 with
/// `Retry-After`), cargo 5xx and 429 (`is_spurious`), so each makes one attempt; cargo reads
/// 401, 403, 404, 410 and 451 on an index file as "no such crate" or "log in", which 424 is not.
pub(crate) const PERMANENT_UPSTREAM_FAILURE: u16 = 424;

/// A failure of one kind's own (an OCI reference, a checksum database's proof, an apt
/// signature): everything the problem table needs, asked through this trait alone, so the
/// shared error type holds one variant for every kind.
pub(crate) trait KindError: std::error::Error + Send + Sync + 'static {
    /// The stable code.
    fn code(&self) -> &'static str;
    /// The HTTP status.
    fn status(&self) -> u16;
    /// Whose side to fix.
    fn origin(&self) -> Origin;
    /// The field (or file and field) that failed, if one did.
    fn field(&self) -> Option<Cow<'static, str>>;
    /// A safe next action.
    fn next(&self) -> &'static str;
    /// What happened.
    fn detail(&self) -> String {
        self.to_string()
    }
    /// The `check` of `fetchgate_integrity_failures_total` this failure counts under, when it
    /// is a signature or proof that did not verify (a digest mismatch is counted where the
    /// bytes are refused, under `registry_artifact`).
    fn integrity(&self) -> Option<&'static str> {
        None
    }
}

/// Why a registry request failed.
#[derive(Clone, Debug)]
pub(crate) enum RegistryError {
    /// No registry is mounted under that name.
    UnknownRegistry(String),
    /// The path is not one this registry serves.
    NotServed(String),
    /// The upstream has no such package, version or file.
    NotFound(String),
    /// The name matched a `deny` pattern, or no `allow` pattern.
    NameRefused {
        /// The canonical name.
        name: String,
        /// `deny` or `allow`.
        list: &'static str,
        /// The pattern that refused it (for `deny`).
        pattern: Option<String>,
    },
    /// Offline, and nothing cached.
    OfflineMiss(String),
    /// The upstream failed (a refusal by the egress policy included).
    Upstream(LocatorFailure),
    /// The metadata could not be read.
    BadMetadata(String),
    /// The upstream's document is longer than `max_metadata_bytes`.
    MetadataTooLarge {
        /// The path below the upstream.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// The upstream failed and the cached copy is past `max_stale_seconds`.
    MetadataTooStale {
        /// The path below the upstream.
        path: String,
        /// Seconds since the upstream last confirmed the copy.
        age: u64,
        /// The limit past the TTL.
        max_stale: u64,
        /// How the upstream failed.
        failure: Box<LocatorFailure>,
    },
    /// The registry published no digest fetchgate can check.
    NoDigest {
        /// `name@version` or the file.
        package: String,
    },
    /// The bytes did not match the published digest; nothing was stored.
    DigestMismatch {
        /// The package.
        package: String,
        /// The version (or file).
        version: String,
        /// The published digest.
        expected: String,
        /// What arrived.
        received: String,
    },
    /// The cache failed.
    Cache(String),
    /// A request, document or artifact refused by its kind's own rules.
    Kind(Arc<dyn KindError>),
    /// A broken invariant inside fetchgate (a task that panicked): not something the cache
    /// directory's disk or permissions can explain.
    Internal(String),
}

impl RegistryError {
    /// The failure `e` of a kind's own.
    pub(crate) fn kind(e: impl KindError) -> Self {
        RegistryError::Kind(Arc::new(e))
    }

    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            RegistryError::UnknownRegistry(_) => "registry_unknown",
            RegistryError::NotServed(_) => "registry_path_not_served",
            RegistryError::NotFound(_) => "package_not_found",
            RegistryError::NameRefused { .. } => "package_name_refused",
            RegistryError::OfflineMiss(_) => "registry_offline_not_cached",
            RegistryError::Upstream(f) if f.code == FetchCode::UpstreamTimeout => {
                "registry_upstream_timeout"
            }
            RegistryError::Upstream(f) if f.refused.is_some() => "registry_upstream_refused",
            RegistryError::Upstream(_) => "registry_upstream_failed",
            RegistryError::BadMetadata(_) => "registry_metadata_invalid",
            RegistryError::MetadataTooLarge { .. } => "registry_metadata_too_large",
            RegistryError::MetadataTooStale { .. } => "registry_metadata_too_stale",
            RegistryError::NoDigest { .. } => "no_published_digest",
            RegistryError::DigestMismatch { .. } => "digest_mismatch",
            RegistryError::Cache(_) => "cache_error",
            RegistryError::Internal(_) => "internal_error",
            RegistryError::Kind(e) => e.code(),
        }
    }

    /// The HTTP status. Content that can never verify is [`PERMANENT_UPSTREAM_FAILURE`], a
    /// status npm, pip and cargo do not retry; `502` stays for outages, which a retry can cure.
    pub(crate) fn status(&self) -> u16 {
        match self {
            RegistryError::UnknownRegistry(_)
            | RegistryError::NotServed(_)
            | RegistryError::NotFound(_) => 404,
            RegistryError::NameRefused { .. } => 403,
            RegistryError::Upstream(f) if f.refused.is_some() => 403,
            RegistryError::OfflineMiss(_) => 503,
            RegistryError::Upstream(f) if f.code == FetchCode::UpstreamTimeout => 504,
            RegistryError::Upstream(_) | RegistryError::MetadataTooStale { .. } => 502,
            RegistryError::BadMetadata(_)
            | RegistryError::MetadataTooLarge { .. }
            | RegistryError::NoDigest { .. }
            | RegistryError::DigestMismatch { .. } => PERMANENT_UPSTREAM_FAILURE,
            RegistryError::Cache(_) | RegistryError::Internal(_) => 500,
            RegistryError::Kind(e) => e.status(),
        }
    }

    /// Where it came from.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            RegistryError::UnknownRegistry(_)
            | RegistryError::NotServed(_)
            | RegistryError::NameRefused { .. }
            | RegistryError::OfflineMiss(_) => Origin::Downstream,
            RegistryError::Upstream(f) if f.refused.is_some() => Origin::Policy,
            RegistryError::NotFound(_)
            | RegistryError::Upstream(_)
            | RegistryError::BadMetadata(_)
            | RegistryError::MetadataTooLarge { .. }
            | RegistryError::MetadataTooStale { .. }
            | RegistryError::NoDigest { .. }
            | RegistryError::DigestMismatch { .. } => Origin::Upstream,
            RegistryError::Cache(_) | RegistryError::Internal(_) => Origin::Internal,
            RegistryError::Kind(e) => e.origin(),
        }
    }

    /// The integrity check a kind's failure counts under, if it is one ([`KindError::integrity`]).
    pub(crate) fn integrity(&self) -> Option<&'static str> {
        match self {
            RegistryError::Kind(e) => e.integrity(),
            _ => None,
        }
    }

    /// The field (or, for apt, the file and field) that failed, if one did.
    pub(crate) fn field(&self) -> Option<Cow<'static, str>> {
        match self {
            RegistryError::Kind(e) => e.field(),
            _ => self.static_field().map(Cow::Borrowed),
        }
    }

    /// The field that failed, when it is one of the config's or the protocol's own names.
    fn static_field(&self) -> Option<&'static str> {
        match self {
            RegistryError::NameRefused { list, .. } => Some(list),
            RegistryError::OfflineMiss(_) => Some("offline"),
            RegistryError::MetadataTooLarge { .. } => Some("max_metadata_bytes"),
            RegistryError::MetadataTooStale { .. } => Some("max_stale_seconds"),
            RegistryError::DigestMismatch { .. } | RegistryError::NoDigest { .. } => {
                Some("integrity")
            }
            _ => None,
        }
    }

    /// What happened.
    pub(crate) fn detail(&self) -> String {
        match self {
            RegistryError::UnknownRegistry(n) => format!("no [[registry]] is named {n:?}"),
            RegistryError::NotServed(p) => format!("{p} is not a path this registry serves"),
            RegistryError::NotFound(what) => format!("the upstream has no {what}"),
            RegistryError::NameRefused {
                name,
                list: "deny",
                pattern,
            } => format!(
                "{name:?} matches the deny pattern {:?}; it is never fetched from this upstream",
                pattern.as_deref().unwrap_or("")
            ),
            RegistryError::NameRefused { name, .. } => {
                format!("{name:?} matches no allow pattern of this registry")
            }
            RegistryError::OfflineMiss(what) => {
                format!("this registry is offline and has no cached copy of {what}")
            }
            RegistryError::Upstream(f) => match &f.refused {
                Some(r) => format!(
                    "the egress policy refused the upstream {}{}: {} ({})",
                    f.locator,
                    f.hop
                        .as_deref()
                        .map(|h| format!(" at its redirect to {h}"))
                        .unwrap_or_default(),
                    r.describe(),
                    f.detail
                ),
                None => format!("{}: {}", f.code, f.detail),
            },
            RegistryError::BadMetadata(why) => why.clone(),
            RegistryError::MetadataTooLarge { path, limit } => format!(
                "the upstream's {path} is longer than max_metadata_bytes ({limit} bytes); reading stopped there"
            ),
            RegistryError::MetadataTooStale {
                path,
                age,
                max_stale,
                failure,
            } => format!(
                "the upstream failed ({}: {}) and the cached {path} was last confirmed {age} s ago, past its TTL plus max_stale_seconds ({max_stale} s); it is not served, so a yank or deprecation is not hidden",
                failure.code, failure.detail
            ),
            RegistryError::NoDigest { package } => format!(
                "the registry published no usable sha512, sha384, sha256 or sha1 digest for {package} (a malformed strongest digest is not replaced by a weaker one); fetchgate serves nothing it cannot verify"
            ),
            RegistryError::DigestMismatch {
                package,
                version,
                expected,
                received,
            } => format!(
                "{package} {version}: the upstream's bytes hash to {received}, but the registry's metadata published {expected}; nothing was stored"
            ),
            RegistryError::Cache(why) | RegistryError::Internal(why) => why.clone(),
            RegistryError::Kind(e) => e.detail(),
        }
    }

    /// A safe next action: for an upstream the policy refused, the `[[egress.trust]]` rule
    /// that would allow it (when one can).
    pub(crate) fn next(&self) -> String {
        if let RegistryError::Upstream(f) = self
            && let Some(r) = &f.refused
        {
            return match r.trust_rule() {
                Some(rule) => format!(
                    "if you operate this upstream, allow it in the config with this rule, then reload (SIGHUP):\n{rule}"
                ),
                None => format!(
                    "no [[egress.trust]] rule can allow {}; {}",
                    r.describe(),
                    r.reason.next_action()
                ),
            };
        }
        self.fixed_next().to_string()
    }

    /// The next action that does not depend on what was refused.
    fn fixed_next(&self) -> &'static str {
        match self {
            RegistryError::UnknownRegistry(_) => "use a name configured in [[registry]]",
            RegistryError::NotServed(_) => {
                "point the client at the registry's base URL, not at a file inside it"
            }
            RegistryError::NotFound(_) => "check the package name and version",
            RegistryError::NameRefused { .. } => {
                "use the internal registry for this name, or ask the operator to change allow/deny"
            }
            RegistryError::OfflineMiss(_) => {
                "fetch it once while the registry is online, or ask the operator to turn offline off"
            }
            RegistryError::Upstream(_) => "retry later; cached metadata is served while it lasts",
            RegistryError::MetadataTooLarge { .. } => {
                "ask the operator to raise this registry's max_metadata_bytes, or ask for a smaller document (npm: the abbreviated packument)"
            }
            RegistryError::MetadataTooStale { .. } => {
                "retry when the upstream is back, or ask the operator to raise max_stale_seconds"
            }
            RegistryError::BadMetadata(_) | RegistryError::NoDigest { .. } => {
                "report it to the registry's operator; do not install this version"
            }
            RegistryError::DigestMismatch { .. } => {
                "do not install these bytes; report the mismatch to the registry's operator"
            }
            RegistryError::Cache(_) => "retry; check the cache directory's disk and permissions",
            RegistryError::Internal(_) => {
                "retry; if it persists, report it with the fetchgate log line"
            }
            RegistryError::Kind(e) => e.next(),
        }
    }

    /// The per-locator report, for upstream failures.
    pub(crate) fn locators(&self) -> Option<&LocatorFailure> {
        match self {
            RegistryError::Upstream(f) => Some(f),
            RegistryError::MetadataTooStale { failure, .. } => Some(failure),
            _ => None,
        }
    }
}
