//! Recent digest mismatches, by upstream URL and the digest it was expected to match: a retry
//! of a tampered artifact is answered with the same refusal instead of another download of
//! the same wrong bytes. Installers retry (npm three times, pip five, CI its whole job), and
//! each retry of a large tampered artifact would otherwise cost the upstream, the egress link
//! and the rate limit what the first one did.
//!
//! An entry is keyed on the digest the metadata named as well as the URL, so metadata that
//! changes to name another digest is not answered from it (the fetch goes ahead, and a new
//! mismatch replaces it). Entries last [`REMEMBERED_FOR`], at most [`MAX_REMEMBERED`] of them;
//! the table lives as long as the process (a reload keeps it).

use std::time::Duration;

/// How long a mismatch is remembered.
pub(crate) const REMEMBERED_FOR: Duration = Duration::from_secs(300);

/// Most mismatches remembered at once (the oldest go first).
pub(crate) const MAX_REMEMBERED: u64 = 4_096;

/// What a mismatch was: the digest expected and the one the bytes had, as the refusal says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// The digest the metadata named (`sha256:…`, or an SRI string).
    pub(crate) expected: String,
    /// The digest of the bytes the upstream served.
    pub(crate) received: String,
}

/// The remembered mismatches.
#[derive(Clone)]
pub(crate) struct Tampered(moka::sync::Cache<(String, String), Mismatch>);

impl Default for Tampered {
    fn default() -> Self {
        Self::new(REMEMBERED_FOR)
    }
}

impl std::fmt::Debug for Tampered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tampered")
            .field("entries", &self.0.entry_count())
            .finish()
    }
}

impl Tampered {
    /// A table keeping each mismatch for `ttl`, at most [`MAX_REMEMBERED`].
    pub(crate) fn new(ttl: Duration) -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(MAX_REMEMBERED)
                .time_to_live(ttl)
                .build(),
        )
    }

    /// The mismatch `url` served a moment ago for bytes expected to be `expected`, if any.
    pub(crate) fn recall(&self, url: &str, expected: &str) -> Option<Mismatch> {
        self.0.get(&(url.to_string(), expected.to_string()))
    }

    /// Remembers that `url` served bytes that did not match.
    pub(crate) fn note(&self, url: &str, mismatch: Mismatch) {
        self.0
            .insert((url.to_string(), mismatch.expected.clone()), mismatch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mismatch(expected: &str) -> Mismatch {
        Mismatch {
            expected: expected.into(),
            received: "sha256:bad".into(),
        }
    }

    #[test]
    fn a_mismatch_is_recalled_for_its_url_and_digest_only() {
        let t = Tampered::default();
        t.note("http://u/a.tgz", mismatch("sha512-A"));
        assert_eq!(
            t.recall("http://u/a.tgz", "sha512-A"),
            Some(mismatch("sha512-A"))
        );
        // Another URL, or metadata naming another digest for the same URL: not answered.
        assert_eq!(t.recall("http://u/b.tgz", "sha512-A"), None);
        assert_eq!(t.recall("http://u/a.tgz", "sha512-B"), None);
    }

    #[test]
    fn the_table_stays_within_its_bound() {
        let t = Tampered::default();
        for i in 0..(MAX_REMEMBERED + 1_000) {
            t.note(&format!("http://u/{i}"), mismatch("sha256:x"));
        }
        t.0.run_pending_tasks();
        assert!(t.0.entry_count() <= MAX_REMEMBERED);
    }
}
