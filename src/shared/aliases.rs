//! Aliases in the bucket: `<algorithm>/<hex>` (npm's sha512 and sha1 integrity digests)
//! naming the sha256 of an object, offered for upload and read back untrusted.

use std::time::Instant;

use super::SharedTier;
use super::client::BucketError;
use super::upload::Job;
use crate::store::Digest;

impl SharedTier {
    /// Queues the alias `<algorithm>/<hex> → sha256` for upload (npm's integrity digests).
    pub(crate) fn offer_alias(&self, algorithm: &'static str, hex: &str, sha256: Digest) {
        self.uploads.offer(Job::Alias {
            algorithm,
            hex: hex.to_string(),
            sha256,
        });
    }

    /// Counts and logs an alias (for `<algorithm>/<hex>`) whose object did not hash to the
    /// registry's digest; it is not read again for `miss_ttl_ms`.
    pub(crate) fn alias_refused(&self, algorithm: &str, hex: &str, sha256: &Digest) {
        let key = self.bucket.alias_key(algorithm, hex);
        self.refused_aliases
            .note(Digest::of(key.as_ref().as_bytes()));
        self.count("alias", "mismatch");
        self.metrics.shared_verify_failures.inc();
        self.metrics
            .integrity_failure(crate::metrics::check::SHARED_BUCKET);
        tracing::warn!(
            alias = %key,
            %sha256,
            "a shared tier alias names bytes that do not match the registry's digest; not served"
        );
    }

    /// The sha256 the bucket's alias for `<algorithm>/<hex>` names, if any. Untrusted: the
    /// caller verifies the bytes it names against the registry's digest before serving them.
    pub(crate) async fn alias(&self, algorithm: &str, hex: &str) -> Option<Digest> {
        if !self.breaker.allow(Instant::now()) {
            self.count("alias", "skipped");
            return None;
        }
        let key = self.bucket.alias_key(algorithm, hex);
        if self
            .refused_aliases
            .recent(&Digest::of(key.as_ref().as_bytes()))
        {
            self.count("alias", "refused_recently");
            return None;
        }
        let found = match self.bucket.get(&key).await {
            Ok(Some(found)) if found.size == 64 => found,
            Ok(_) => {
                self.breaker.success();
                self.count("alias", "miss");
                return None;
            }
            Err(e) => {
                self.failed("alias", &key, &e);
                return None;
            }
        };
        let mut body = Vec::with_capacity(64);
        let mut chunks = found.chunks;
        loop {
            let next = std::future::poll_fn(|cx| chunks.as_mut().poll_next(cx));
            match tokio::time::timeout(self.settings.timeout, next).await {
                Ok(Some(Ok(b))) if body.len() + b.len() <= 64 => body.extend_from_slice(&b),
                Ok(None) => break,
                Ok(Some(Ok(_))) => {
                    // Longer than a hex digest: an answer, but not an alias.
                    self.breaker.success();
                    return None;
                }
                Ok(Some(Err(e))) => {
                    self.failed("alias", &key, &BucketError::Failed(e.to_string()));
                    return None;
                }
                Err(_) => {
                    self.failed("alias", &key, &BucketError::Timeout);
                    return None;
                }
            }
        }
        self.breaker.success();
        self.count("alias", "hit");
        std::str::from_utf8(&body)
            .ok()
            .and_then(|hex| Digest::parse(hex).ok())
    }
}
