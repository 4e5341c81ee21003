//! apt failures: one type with a stable code, an HTTP status, an origin and the field or
//! locator that failed, shaped like `RegistryError` so `serve/problem.rs` can turn it into a
//! problem response when `kind = "apt"` is wired in.

use std::borrow::Cow;

use crate::errors::Origin;
use crate::fetch::failure::LocatorFailure;
use crate::registry::error::KindError;

/// What kind of apt failure this is; each has one stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AptErrorKind {
    /// The operator's `signed_by` keyring could not be read.
    Keyring,
    /// The signature framework or a signature itself is broken, or the body changed.
    SignatureInvalid,
    /// Signed, but by no key in `signed_by`.
    KeyNotTrusted,
    /// The only matching keys have expired.
    KeyExpired,
    /// The only matching keys were revoked.
    KeyRevoked,
    /// A Release field is missing or unreadable.
    ReleaseInvalid,
    /// `Valid-Until` has passed.
    ReleaseExpired,
    /// `Date` is further in the future than the allowed clock skew.
    ReleaseFromFuture,
    /// `Date` is older than that of a Release of the suite already verified (a replay).
    ReleaseRollback,
    /// Neither `Suite` nor `Codename` names the suite the path asked for (another suite's
    /// Release, signed by the same archive key, served in its place).
    SuiteMismatch,
    /// A `Packages`/`Sources` file is unreadable.
    IndexInvalid,
    /// A file would decompress past its cap.
    IndexTooLarge,
    /// No verified index lists this file.
    NotInSignedIndex,
    /// The request path is malformed (`..`, an encoded slash, an empty segment).
    PathRefused,
    /// The path names a suite, component or file this repository does not serve.
    NotServed,
}

/// One apt failure: its kind, the field or locator that failed, and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AptError {
    /// Which failure.
    pub(crate) kind: AptErrorKind,
    /// The field (`Valid-Until`, `SHA256`) or locator (`dists/stable/InRelease`) that failed.
    pub(crate) field: String,
    /// What happened, and what to do about it.
    pub(crate) detail: String,
}

impl AptError {
    /// A failure of `kind` at `field`.
    pub(crate) fn new(
        kind: AptErrorKind,
        field: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            detail: detail.into(),
        }
    }

    /// The stable code (apt shows it in the HTTP reason phrase).
    pub(crate) fn code(&self) -> &'static str {
        match self.kind {
            AptErrorKind::Keyring => "apt_keyring_invalid",
            AptErrorKind::SignatureInvalid => "apt_signature_invalid",
            AptErrorKind::KeyNotTrusted => "apt_key_not_trusted",
            AptErrorKind::KeyExpired => "apt_key_expired",
            AptErrorKind::KeyRevoked => "apt_key_revoked",
            AptErrorKind::ReleaseInvalid => "apt_release_invalid",
            AptErrorKind::ReleaseExpired => "apt_release_expired",
            AptErrorKind::ReleaseFromFuture => "apt_release_from_future",
            AptErrorKind::ReleaseRollback => "apt_release_rollback",
            AptErrorKind::SuiteMismatch => "apt_release_suite_mismatch",
            AptErrorKind::IndexInvalid => "apt_index_invalid",
            AptErrorKind::IndexTooLarge => "apt_index_too_large",
            AptErrorKind::NotInSignedIndex => "not_in_signed_index",
            AptErrorKind::PathRefused => "apt_path_refused",
            AptErrorKind::NotServed => "registry_path_not_served",
        }
    }

    /// The HTTP status: upstream content that can never verify is `424`, as for every
    /// registry (a retry cannot make a bad signature good).
    pub(crate) fn status(&self) -> u16 {
        match self.kind {
            AptErrorKind::Keyring => 500,
            AptErrorKind::PathRefused => 400,
            AptErrorKind::NotServed => 404,
            _ => crate::registry::error::PERMANENT_UPSTREAM_FAILURE,
        }
    }

    /// A safe next action.
    pub(crate) fn next(&self) -> &'static str {
        match self.kind {
            AptErrorKind::Keyring => "fix the registry's signed_by file, then reload (SIGHUP)",
            AptErrorKind::SignatureInvalid
            | AptErrorKind::IndexInvalid
            | AptErrorKind::IndexTooLarge
            | AptErrorKind::NotInSignedIndex => {
                "do not use these bytes; report it to the repository's operator or use another mirror"
            }
            AptErrorKind::KeyNotTrusted | AptErrorKind::KeyExpired | AptErrorKind::KeyRevoked => {
                "if the repository rotated its key, verify the new key out of band and put it in the registry's signed_by file"
            }
            AptErrorKind::ReleaseInvalid => {
                "report the malformed Release to the repository's operator"
            }
            AptErrorKind::ReleaseExpired => {
                "wait for the mirror to publish a fresh Release, or use another mirror"
            }
            AptErrorKind::ReleaseFromFuture => "check this machine's clock and the mirror's",
            AptErrorKind::ReleaseRollback => {
                "the mirror serves an older Release than one already verified; use another mirror or wait until it has synced"
            }
            AptErrorKind::SuiteMismatch => {
                "the mirror serves another suite's Release under this suite's path; use another mirror, and check sources.list names the suite or codename the archive publishes"
            }
            AptErrorKind::PathRefused | AptErrorKind::NotServed => {
                "point sources.list at the registry's base URL with a suite and component it serves"
            }
        }
    }

    /// Every kind, for the tests that read each one back.
    #[cfg(test)]
    const KINDS: [AptErrorKind; 15] = [
        AptErrorKind::Keyring,
        AptErrorKind::SignatureInvalid,
        AptErrorKind::KeyNotTrusted,
        AptErrorKind::KeyExpired,
        AptErrorKind::KeyRevoked,
        AptErrorKind::ReleaseInvalid,
        AptErrorKind::ReleaseExpired,
        AptErrorKind::ReleaseFromFuture,
        AptErrorKind::ReleaseRollback,
        AptErrorKind::SuiteMismatch,
        AptErrorKind::IndexInvalid,
        AptErrorKind::IndexTooLarge,
        AptErrorKind::NotInSignedIndex,
        AptErrorKind::PathRefused,
        AptErrorKind::NotServed,
    ];

    /// This failure as the metadata cache carries a refused upstream answer (so a stale,
    /// verified copy is served instead while it lasts).
    pub(crate) fn into_failure(self, locator: &str) -> LocatorFailure {
        let next = self.next();
        LocatorFailure::rejected(locator, self, next)
    }

    /// The apt failure a [`Self::into_failure`] carried, when `f` is one.
    pub(crate) fn from_failure(f: &LocatorFailure) -> Option<Self> {
        f.cause.as_ref()?.get::<Self>().cloned()
    }

    /// Whose side to fix.
    pub(crate) fn origin(&self) -> Origin {
        match self.kind {
            AptErrorKind::Keyring => Origin::Internal,
            AptErrorKind::PathRefused | AptErrorKind::NotServed => Origin::Downstream,
            _ => Origin::Upstream,
        }
    }
}

impl std::fmt::Display for AptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code(), self.field, self.detail)
    }
}

impl std::error::Error for AptError {}

impl KindError for AptError {
    fn code(&self) -> &'static str {
        AptError::code(self)
    }
    fn status(&self) -> u16 {
        AptError::status(self)
    }
    fn origin(&self) -> Origin {
        AptError::origin(self)
    }
    /// A key that is not trusted, expired or revoked, or a keyring that does not read, is
    /// the registry's `signed_by` to fix, whatever file it was found on.
    fn field(&self) -> Option<Cow<'static, str>> {
        match self.kind {
            AptErrorKind::Keyring
            | AptErrorKind::KeyNotTrusted
            | AptErrorKind::KeyExpired
            | AptErrorKind::KeyRevoked => Some(Cow::Borrowed("signed_by")),
            _ => Some(Cow::Owned(self.field.clone())),
        }
    }
    fn next(&self) -> &'static str {
        AptError::next(self)
    }
    fn detail(&self) -> String {
        self.detail.clone()
    }
    /// A Release whose signature does not verify with `signed_by`.
    fn integrity(&self) -> Option<&'static str> {
        matches!(
            self.kind,
            AptErrorKind::SignatureInvalid
                | AptErrorKind::KeyNotTrusted
                | AptErrorKind::KeyExpired
                | AptErrorKind::KeyRevoked
        )
        .then_some(crate::metrics::check::APT_SIGNATURE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::failure::FetchCode;

    #[test]
    fn refusals_of_unvouched_files_carry_the_issue_code() {
        let e = AptError::new(
            AptErrorKind::NotInSignedIndex,
            "pool/x.deb",
            "no index lists it",
        );
        assert_eq!(e.code(), "not_in_signed_index");
        assert_eq!(e.origin(), Origin::Upstream);
        let p = AptError::new(AptErrorKind::PathRefused, "path", "..");
        assert_eq!((p.status(), p.origin()), (400, Origin::Downstream));
    }

    #[test]
    fn a_failure_carried_through_the_metadata_cache_reads_back_as_itself() {
        for kind in AptError::KINDS {
            let e = AptError::new(kind, "dists/stable/InRelease:Date", "why: and more");
            let back = AptError::from_failure(&e.clone().into_failure("http://m.test/x"));
            assert_eq!(back, Some(e));
        }
        let other = LocatorFailure {
            locator: "x".into(),
            hop: None,
            code: FetchCode::UpstreamStatus,
            detail: "d".into(),
            next: "n",
            refused: None,
            cause: None,
        };
        assert_eq!(AptError::from_failure(&other), None);
    }
}
