//! The tier as the `cache stats` and `cache push` commands see it: a census of the bucket
//! against the local store, and uploading every local entry it lacks.

use std::sync::Arc;

use serde::Serialize;

use super::{SharedTier, client, upload};
use crate::store::{Digest, Store};

/// The shared tier's state, for `cache stats`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TierStats {
    /// `s3://bucket/prefix`.
    pub(crate) url: String,
    /// The endpoint, if not AWS itself.
    pub(crate) endpoint: Option<String>,
    /// Whether the bucket answered a listing.
    pub(crate) reachable: bool,
    /// Objects under the prefix (counted up to a cap).
    pub(crate) objects: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// True if counting stopped at the cap.
    pub(crate) truncated: bool,
    /// Local entries the bucket lacks (what `cache push` would upload).
    pub(crate) local_missing: Option<u64>,
    /// Why the bucket could not be read, if it could not.
    pub(crate) error: Option<String>,
}

/// What `cache push` did.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct PushReport {
    /// Objects uploaded.
    pub(crate) uploaded: u64,
    /// Objects the bucket already had.
    pub(crate) present: u64,
    /// Objects that could not be uploaded.
    pub(crate) failed: u64,
}

/// Most objects `cache stats` counts in the bucket.
const CENSUS_CAP: usize = 100_000;

impl SharedTier {
    /// Uploads every local entry the bucket lacks, now (`fetchgate cache push`), calling
    /// `each` as it takes up every entry (the command draws its progress bar from it).
    pub(crate) async fn push_with(&self, store: &Arc<Store>, each: &mut dyn FnMut()) -> PushReport {
        let mut report = PushReport::default();
        for entry in store.list() {
            each();
            let Ok(digest) = Digest::parse(&entry.sha256) else {
                continue;
            };
            let label = entry.record.label.clone();
            match upload::push_one(&self.bucket, store, digest, label).await {
                Ok(client::Put::Created) => report.uploaded += 1,
                Ok(client::Put::Existed) => report.present += 1,
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(sha256 = %digest, error = %e, "cache push: upload failed");
                }
            }
        }
        report
    }

    /// The bucket's state as seen from here, with the local entries it lacks.
    pub(crate) async fn stats(&self, store: &Arc<Store>) -> TierStats {
        let mut stats = TierStats {
            url: self.settings.url(),
            endpoint: self.settings.endpoint.clone(),
            reachable: false,
            objects: 0,
            bytes: 0,
            truncated: false,
            local_missing: None,
            error: None,
        };
        match self.bucket.census(CENSUS_CAP).await {
            Ok((objects, bytes, truncated)) => {
                stats.reachable = true;
                (stats.objects, stats.bytes, stats.truncated) = (objects, bytes, truncated);
            }
            Err(e) => {
                stats.error = Some(e.to_string());
                return stats;
            }
        }
        let mut missing = 0;
        for entry in store.list() {
            let Ok(digest) = Digest::parse(&entry.sha256) else {
                continue;
            };
            match self.bucket.exists(&self.bucket.object_key(&digest)).await {
                Ok(true) => {}
                Ok(false) => missing += 1,
                Err(e) => {
                    stats.error = Some(e.to_string());
                    return stats;
                }
            }
        }
        stats.local_missing = Some(missing);
        stats
    }
}
