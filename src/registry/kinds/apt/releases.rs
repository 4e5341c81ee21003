//! A suite's Release files as metadata: `InRelease` (or `Release` with `Release.gpg`) read
//! through the metadata cache, verified with the registry's keyring *before* the cache keeps
//! a new copy (so a refused one never replaces a verified one, which is served stale while it
//! lasts), and judged again at every use (a cached Release can expire). A new Release dated
//! before the newest one verified for its suite (in this process, or remembered on disk by
//! [`super::known`]) is a replay (a freeze attack) and is refused. What a verified Release
//! and its indexes vouch for is kept per suite, and dropped when the Release changes.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use http::HeaderMap;

use super::config::AptSource;
use super::index::SignedIndex;
use super::release::{self, Release};
use super::signed::{MAX_RELEASE_BYTES, verify_detached, verify_inrelease};
use super::state::{Apt, Suite, Vouched};
use super::{AptError, AptErrorKind};
use crate::fetch::expected::MetaResponse;
use crate::fetch::failure::LocatorFailure;
use crate::registry::error::RegistryError;
use crate::registry::metadata::{Entry, Freshness};
use crate::registry::settings::Front;
use crate::store::Digest;

/// How a suite's Release is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `InRelease`, cleartext-signed.
    Inline,
    /// `Release` with the detached `Release.gpg`; the cache keeps both in one framed body.
    Detached,
}

/// The framed body of a detached Release: `Release`'s length (8 bytes, big-endian),
/// `Release`, then `Release.gpg`.
fn frame(release: &[u8], signature: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(8 + release.len() + signature.len());
    out.extend_from_slice(&(release.len() as u64).to_be_bytes());
    out.extend_from_slice(release);
    out.extend_from_slice(signature);
    Bytes::from(out)
}

/// `Release` and `Release.gpg` out of a framed body.
pub(crate) fn unframe(body: &Bytes) -> Option<(Bytes, Bytes)> {
    let len: [u8; 8] = body.get(..8)?.try_into().ok()?;
    let end = usize::try_from(u64::from_be_bytes(len))
        .ok()?
        .checked_add(8)?;
    (end <= body.len()).then(|| (body.slice(8..end), body.slice(end..)))
}

/// Verifies `body` (as the cache keeps it, in `form`), reads its Release at `now` and checks
/// that it is the Release of `suite` (the path's), not another suite's.
fn judge(
    body: &Bytes,
    form: Form,
    source: &AptSource,
    suite: &str,
    now: SystemTime,
    locator: &str,
) -> Result<Release, AptError> {
    let verified = match form {
        Form::Inline => verify_inrelease(body, &source.keyring, now, locator)?,
        Form::Detached => {
            let (release, signature) = unframe(body).ok_or_else(|| {
                AptError::new(
                    AptErrorKind::SignatureInvalid,
                    locator,
                    "the cached Release and Release.gpg are unreadable; it is fetched again",
                )
            })?;
            verify_detached(&release, &signature, &source.keyring, now, locator)?
        }
    };
    let release = release::parse(&verified.signed, now, locator)?;
    release.check_suite(suite, locator)?;
    Ok(release)
}

impl Apt<'_> {
    /// The cached `InRelease` (`Inline`) or `Release` + `Release.gpg` (`Detached`) of
    /// `suite`: a new upstream copy is kept only once it verified.
    pub(crate) async fn apt_release_entry(
        &self,
        front: &Front,
        source: &AptSource,
        suite: &str,
        form: Form,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError> {
        let name = match form {
            Form::Inline => "InRelease",
            Form::Detached => "Release",
        };
        let path = format!("dists/{suite}/{name}");
        let url = front.settings.upstream.join(&path).ok();
        let locator = url.as_ref().map_or(path.clone(), |u| u.to_string());
        let gpg_url = front
            .settings
            .upstream
            .join(&format!("dists/{suite}/Release.gpg"))
            .ok();
        let (registry, upstream) = (&front.settings.name, &front.settings.upstream);
        let check = |body: Bytes| async move {
            let refused = |e: AptError| {
                tracing::warn!(registry = %registry, suite, code = e.code(), field = %e.field, detail = %e.detail, "refused the upstream's Release; a verified copy, if cached, stays in use");
                e.into_failure(&locator)
            };
            let body = match form {
                Form::Inline => body,
                Form::Detached => {
                    let Some(gpg) = gpg_url else {
                        return Err(refused(AptError::new(
                            AptErrorKind::NotServed,
                            "Release.gpg",
                            "no URL for Release.gpg",
                        )));
                    };
                    let answer = self
                        .core
                        .fetcher
                        .get_metadata(
                            gpg.as_str(),
                            HeaderMap::new(),
                            front.credential.as_ref(),
                            MAX_RELEASE_BYTES as u64,
                        )
                        .await?;
                    let MetaResponse::Ok { body: sig, .. } = answer else {
                        return Err(refused(AptError::new(
                            AptErrorKind::SignatureInvalid,
                            "Release.gpg",
                            "the upstream has a Release but no Release.gpg, so nothing signs it",
                        )));
                    };
                    frame(&body, &sig)
                }
            };
            let release =
                judge(&body, form, source, suite, SystemTime::now(), &locator).map_err(refused)?;
            let remembered = {
                let path = super::known::file(self.core.fetcher.store().root(), registry, upstream);
                let suite = suite.to_string();
                tokio::task::spawn_blocking(move || {
                    super::known::load(&path)
                        .into_iter()
                        .find(|k| k.suite == suite)
                        .map(|k| k.date)
                })
                .await
                .ok()
                .flatten()
            };
            let known = source
                .state
                .date_of(suite)
                .map(super::keyring::unix)
                .max(remembered);
            if let Some(known) = known
                && super::keyring::unix(release.date) < known
            {
                return Err(refused(AptError::new(
                    AptErrorKind::ReleaseRollback,
                    format!("{locator}:Date"),
                    "this Release is dated before the one of this suite fetchgate already verified; an older signed Release is a replay, and is not served",
                )));
            }
            Ok::<Bytes, LocatorFailure>(body)
        };
        let key = format!("{suite}:{name}");
        let got = self
            .core
            .meta_checked(front, &key, &path, "*/*", check)
            .await
            .map_err(apt_failure)?;
        Ok(got)
    }

    /// The verified Release of `suite` (`InRelease`, else `Release` + `Release.gpg`), judged
    /// now, with what it vouches for; a Release that changed starts its suite afresh.
    pub(crate) async fn apt_suite(
        &self,
        front: &Front,
        source: &AptSource,
        suite: &str,
    ) -> Result<Arc<Suite>, RegistryError> {
        let mut form = Form::Inline;
        let (mut entry, _) = self.apt_release_entry(front, source, suite, form).await?;
        if entry.status != 200 {
            form = Form::Detached;
            entry = self.apt_release_entry(front, source, suite, form).await?.0;
        }
        if entry.status != 200 {
            return Err(RegistryError::NotFound(format!(
                "dists/{suite}/InRelease or Release"
            )));
        }
        self.apt_judged(front, source, suite, &entry.body, form)
            .await
    }

    /// The suite for the verified `body`: the one already read when it came from the same
    /// bytes (its `Valid-Until` checked again), else verified and read anew.
    pub(crate) async fn apt_judged(
        &self,
        front: &Front,
        source: &AptSource,
        suite: &str,
        body: &Bytes,
        form: Form,
    ) -> Result<Arc<Suite>, RegistryError> {
        let digest = Digest::of(body);
        let now = SystemTime::now();
        let locator = format!("dists/{suite}");
        let known = source
            .state
            .suites
            .lock()
            .ok()
            .and_then(|m| m.get(suite).cloned());
        if let Some(s) = known.filter(|s| s.source == digest) {
            if let Some(until) = s.release.valid_until
                && until <= now
            {
                return Err(RegistryError::kind(AptError::new(
                    AptErrorKind::ReleaseExpired,
                    format!("{locator}:Valid-Until"),
                    "the cached Release is past its Valid-Until; apt would refuse it too",
                )));
            }
            return Ok(s);
        }
        let release =
            judge(body, form, source, suite, now, &locator).map_err(RegistryError::kind)?;
        let mut index = SignedIndex::default();
        index.add_release(suite, release.clone());
        let fresh = Arc::new(Suite {
            name: suite.to_string(),
            source: digest,
            release,
            index: Mutex::new(Vouched {
                index,
                read: Default::default(),
            }),
        });
        let date = super::keyring::unix(fresh.release.date);
        if let Ok(mut m) = source.state.suites.lock() {
            m.insert(suite.to_string(), fresh.clone());
        }
        let path = super::known::file(
            self.core.fetcher.store().root(),
            &front.settings.name,
            &front.settings.upstream,
        );
        let (name, owned) = (front.settings.name.clone(), suite.to_string());
        // Awaited, so a Release a client has seen is remembered before a crash can forget it.
        let remembered =
            tokio::task::spawn_blocking(move || super::known::remember(&path, &owned, date)).await;
        if !matches!(remembered, Ok(Ok(()))) {
            tracing::warn!(registry = %name, suite = %suite, "the verified suite was not remembered; after a restart, apt update before downloading");
        }
        Ok(fresh)
    }
}

/// An upstream failure that carried an apt refusal, as that refusal.
pub(crate) fn apt_failure(e: RegistryError) -> RegistryError {
    match &e {
        RegistryError::Upstream(f) => AptError::from_failure(f).map_or(e, RegistryError::kind),
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_detached_release_splits_back_and_a_cut_one_does_not() {
        let body = frame(b"Release text\n", b"sig");
        let (r, s) = unframe(&body).unwrap();
        assert_eq!((&r[..], &s[..]), (&b"Release text\n"[..], &b"sig"[..]));
        assert!(unframe(&body.slice(..10)).is_none());
        assert!(unframe(&Bytes::from_static(b"short")).is_none());
    }
}
