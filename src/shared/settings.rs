//! The `[shared]` table of the config file: as written ([`SharedSection`]) and checked
//! ([`SharedSettings`]), every error naming the field and a safe next step.
//!
//! The bucket's endpoint is an operator destination: it is named here and nowhere else, and
//! nothing in the environment (no `AWS_ENDPOINT`, no instance metadata) can move it. The
//! checks of the URL, endpoint and CA file themselves are `bucket_address`.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::bucket_address::{bucket_and_prefix, ca_pem, endpoint};
use super::fleet_meta::FleetKey;
use crate::toml_file::{FileError, TomlSource};

/// `timeout_ms` when unset: a healthy bucket on the same network answers well within it.
const TIMEOUT_DEFAULT_MS: u64 = 5000;
/// `upload_queue` when unset.
const UPLOAD_QUEUE_DEFAULT: u64 = 1024;
/// `breaker_cooldown_ms` when unset: how long a dead tier is left alone.
const COOLDOWN_DEFAULT_MS: u64 = 30_000;
/// `miss_ttl_ms` when unset: long enough to absorb a burst of misses for one digest, short
/// enough that another instance's upload is seen soon.
const MISS_TTL_DEFAULT_MS: u64 = 5000;
/// The most `miss_ttl_ms` may be.
const MISS_TTL_MAX_MS: u64 = 60_000;
/// `lease_ttl_ms` when unset: a holder renews every third of it, and a lease not renewed
/// for twice it (its deadline and the skew margin) is taken over.
const LEASE_TTL_DEFAULT_MS: u64 = 10_000;
/// `lease_wait_ms` when unset: long enough for a healthy instance to fetch a large artifact
/// from a fast upstream and upload it, short enough that a holder stuck on a trickling one
/// holds the rest of the fleet for at most a minute.
const LEASE_WAIT_DEFAULT_MS: u64 = 60_000;
/// The most `lease_ttl_ms` and `lease_wait_ms` may be.
const LEASE_MAX_MS: u64 = 600_000;
/// The region sent when none is named (S3-compatible stores mostly ignore it).
const REGION_DEFAULT: &str = "us-east-1";

/// The `[shared]` table, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SharedSection {
    /// `s3://bucket/prefix`.
    pub(crate) url: Option<Spanned<String>>,
    /// The S3-compatible endpoint (`https://...`; `http://` only with `allow_http`).
    pub(crate) endpoint: Option<Spanned<String>>,
    /// Allows an `http://` endpoint.
    pub(crate) allow_http: Option<Spanned<bool>>,
    /// A PEM file of CA certificates trusted for the endpoint (besides the system's roots).
    pub(crate) ca_file: Option<Spanned<String>>,
    /// The signing region.
    pub(crate) region: Option<Spanned<String>>,
    /// The access key id (else `AWS_ACCESS_KEY_ID`).
    pub(crate) access_key_id: Option<Spanned<String>>,
    /// A file holding the secret access key (else `AWS_SECRET_ACCESS_KEY`).
    pub(crate) secret_access_key_file: Option<Spanned<String>>,
    /// Time allowed for one shared-tier operation (and for each silence inside a body).
    pub(crate) timeout_ms: Option<Spanned<u64>>,
    /// Most uploads waiting; more are dropped and counted.
    pub(crate) upload_queue: Option<Spanned<u64>>,
    /// How long the circuit breaker leaves a failing tier alone before probing it again.
    pub(crate) breaker_cooldown_ms: Option<Spanned<u64>>,
    /// How long a digest the bucket lacked is not asked for again (0: always ask).
    pub(crate) miss_ttl_ms: Option<Spanned<u64>>,
    /// A file holding the fleet key that seals shared metadata (mode 0600); without it,
    /// metadata is not shared.
    pub(crate) fleet_key_file: Option<Spanned<String>>,
    /// How far ahead a lease holder's deadline is set.
    pub(crate) lease_ttl_ms: Option<Spanned<u64>>,
    /// The longest an instance waits on another's lease before fetching for itself.
    pub(crate) lease_wait_ms: Option<Spanned<u64>>,
}

/// The key pair the bucket is signed with. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// The access key id.
    pub(crate) access_key_id: String,
    /// The secret access key.
    pub(crate) secret_access_key: String,
    /// A session token, from `AWS_SESSION_TOKEN` only.
    pub(crate) session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Checked `[shared]` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedSettings {
    /// The bucket.
    pub(crate) bucket: String,
    /// The key prefix inside it, without leading or trailing `/` (may be empty).
    pub(crate) prefix: String,
    /// The endpoint, or `None` for AWS S3 itself.
    pub(crate) endpoint: Option<String>,
    /// Whether an `http://` endpoint was allowed.
    pub(crate) allow_http: bool,
    /// PEM CA certificates trusted for the endpoint, read from `ca_file`.
    pub(crate) ca_pem: Option<Vec<u8>>,
    /// The signing region.
    pub(crate) region: String,
    /// The key pair.
    pub(crate) credentials: Credentials,
    /// Time allowed for one operation.
    pub(crate) timeout: Duration,
    /// Most uploads waiting.
    pub(crate) upload_queue: usize,
    /// How long an open breaker stays open.
    pub(crate) breaker_cooldown: Duration,
    /// How long a bucket miss is remembered.
    pub(crate) miss_ttl: Duration,
    /// The fleet key, when metadata is shared.
    pub(crate) fleet_key: Option<FleetKey>,
    /// How leases are timed.
    pub(crate) leases: LeaseTimes,
}

impl SharedSettings {
    /// The tier's URL as operators wrote it, for logs and `cache stats` (no credentials).
    pub(crate) fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }

    /// Checks `[shared]`: `None` when the table is absent. `env` reads an environment
    /// variable (the process's, or a test's); a relative `secret_access_key_file` is taken
    /// from `base`.
    pub(crate) fn from_section(
        section: Option<&SharedSection>,
        base: &Path,
        src: &TomlSource<'_>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, FileError> {
        let Some(section) = section else {
            return Ok(None);
        };
        let Some(url) = &section.url else {
            return Err(src.error(
                "shared.url",
                "[shared] needs url = \"s3://bucket/prefix\"; add it, or remove the [shared] table",
            ));
        };
        let (bucket, prefix) = bucket_and_prefix(url.get_ref())
            .map_err(|why| src.error_at(url.span(), why.to_string()))?;
        let allow_http = section.allow_http.as_ref().is_some_and(|v| *v.get_ref());
        let endpoint = match &section.endpoint {
            None => None,
            Some(e) => Some(
                endpoint(e.get_ref(), allow_http)
                    .map_err(|why| src.error_at(e.span(), why.to_string()))?,
            ),
        };
        let ca_pem = match &section.ca_file {
            None => None,
            Some(file) => Some(
                ca_pem(&base.join(file.get_ref()))
                    .map_err(|why| src.error_at(file.span(), why.to_string()))?,
            ),
        };
        let region = match &section.region {
            Some(r) if r.get_ref().trim().is_empty() => {
                return Err(src.error_at(r.span(), "the region is empty; name one or remove it"));
            }
            Some(r) => r.get_ref().clone(),
            None => REGION_DEFAULT.to_string(),
        };
        let positive = |v: &Option<Spanned<u64>>, default: u64| match v {
            Some(v) if *v.get_ref() == 0 => Err(src.error_at(v.span(), "must be at least 1")),
            Some(v) => Ok(*v.get_ref()),
            None => Ok(default),
        };
        let miss_ttl_ms = match &section.miss_ttl_ms {
            Some(v) if *v.get_ref() > MISS_TTL_MAX_MS => {
                return Err(src.error_at(
                    v.span(),
                    format!("must be from 0 to {MISS_TTL_MAX_MS} (one minute)"),
                ));
            }
            Some(v) => *v.get_ref(),
            None => MISS_TTL_DEFAULT_MS,
        };
        let lease_ms = |v: &Option<Spanned<u64>>, default: u64| match v {
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > LEASE_MAX_MS => Err(src.error_at(
                v.span(),
                format!("must be from 1 to {LEASE_MAX_MS} (ten minutes)"),
            )),
            Some(v) => Ok(Duration::from_millis(*v.get_ref())),
            None => Ok(Duration::from_millis(default)),
        };
        let leases = LeaseTimes {
            ttl: lease_ms(&section.lease_ttl_ms, LEASE_TTL_DEFAULT_MS)?,
            wait: lease_ms(&section.lease_wait_ms, LEASE_WAIT_DEFAULT_MS)?,
        };
        let fleet_key = match &section.fleet_key_file {
            None => None,
            Some(file) => Some(
                FleetKey::from_file(&base.join(file.get_ref()))
                    .map_err(|why| src.error_at(file.span(), why))?,
            ),
        };
        Ok(Some(Self {
            bucket,
            prefix,
            endpoint,
            allow_http,
            ca_pem,
            region,
            credentials: credentials(section, base, src, env)?,
            timeout: Duration::from_millis(positive(&section.timeout_ms, TIMEOUT_DEFAULT_MS)?),
            upload_queue: usize::try_from(positive(&section.upload_queue, UPLOAD_QUEUE_DEFAULT)?)
                .unwrap_or(usize::MAX),
            breaker_cooldown: Duration::from_millis(positive(
                &section.breaker_cooldown_ms,
                COOLDOWN_DEFAULT_MS,
            )?),
            miss_ttl: Duration::from_millis(miss_ttl_ms),
            fleet_key,
            leases,
        }))
    }
}

/// The key pair from the config (id, and the secret from its file) or from `AWS_*`
/// variables. Never from instance metadata: that would be a destination nobody named.
fn credentials(
    section: &SharedSection,
    base: &Path,
    src: &TomlSource<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Credentials, FileError> {
    let access_key_id = match &section.access_key_id {
        Some(id) if id.get_ref().trim().is_empty() => {
            return Err(src.error_at(id.span(), "the access key id is empty"));
        }
        Some(id) => id.get_ref().clone(),
        None => env("AWS_ACCESS_KEY_ID").ok_or_else(|| {
            src.error(
                "shared.access_key_id",
                "no access key id: set access_key_id in [shared] or AWS_ACCESS_KEY_ID in the environment",
            )
        })?,
    };
    let secret_access_key = match &section.secret_access_key_file {
        Some(file) => {
            let path = base.join(file.get_ref());
            let text = std::fs::read_to_string(&path).map_err(|e| {
                src.error_at(
                    file.span(),
                    format!(
                        "cannot read {}: {e}; point secret_access_key_file at a readable file holding only the secret",
                        path.display()
                    ),
                )
            })?;
            let secret = text.trim().to_string();
            if secret.is_empty() {
                return Err(src.error_at(
                    file.span(),
                    format!("{} is empty; write the secret access key into it", path.display()),
                ));
            }
            secret
        }
        None => env("AWS_SECRET_ACCESS_KEY").ok_or_else(|| {
            src.error(
                "shared.secret_access_key_file",
                "no secret access key: set secret_access_key_file in [shared] or AWS_SECRET_ACCESS_KEY in the environment",
            )
        })?,
    };
    Ok(Credentials {
        access_key_id,
        secret_access_key,
        session_token: env("AWS_SESSION_TOKEN").filter(|t| !t.is_empty()),
    })
}

/// How leases are timed (`[shared] lease_ttl_ms`, `lease_wait_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeaseTimes {
    /// How far ahead a holder's deadline is set, each time it takes or renews the lease.
    pub(crate) ttl: Duration,
    /// The longest a waiter waits on another instance's lease before fetching for itself.
    pub(crate) wait: Duration,
}

impl LeaseTimes {
    /// How often a holder renews: three times a deadline.
    pub(crate) fn renew_every(self) -> Duration {
        self.ttl / 3
    }

    /// How long past a lease's deadline it is still respected: one more deadline, so clocks
    /// that disagree by less than `ttl` never take a live lease over.
    pub(crate) fn skew_margin(self) -> Duration {
        self.ttl
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
