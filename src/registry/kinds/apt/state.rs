//! What an apt registry has verified ([`AptState`]), and [`Apt`], the registry core at work
//! for one apt request. What an apt registry keeps (its
//! keyring, filters and what they verified) is its [`super::config::AptSource`]; each file of
//! the kind adds the methods of its part to [`Apt`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::index::SignedIndex;
use super::release::Release;
use crate::registry::core::RegistryCore;
use crate::store::Digest;

/// The registry core at work for one apt request.
pub(super) struct Apt<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
}

/// What one apt registry has verified, per suite: a fresh one per config load.
#[derive(Debug, Default)]
pub(crate) struct AptState {
    pub(super) suites: Mutex<HashMap<String, Arc<Suite>>>,
}

impl AptState {
    /// The `Date` of the Release of `suite` verified last in this process.
    pub(super) fn date_of(&self, suite: &str) -> Option<SystemTime> {
        let suites = self.suites.lock().ok()?;
        suites.get(suite).map(|s| s.release.date)
    }

    /// The suites verified so far in this process.
    pub(crate) fn known(&self) -> Vec<String> {
        self.suites
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// One suite's verified Release and what its verified indexes vouch for.
#[derive(Debug)]
pub(crate) struct Suite {
    /// The suite as the path names it.
    pub(crate) name: String,
    /// The SHA-256 of the cached body the Release was read from.
    pub(super) source: Digest,
    /// The verified Release.
    pub(crate) release: Release,
    /// The Release and the `Packages`/`Sources` files read so far.
    pub(crate) index: Mutex<Vouched>,
}

/// A suite's signed index and which of its index files have been read into it.
#[derive(Debug, Default)]
pub(crate) struct Vouched {
    /// What the Release and the indexes read vouch for.
    pub(crate) index: SignedIndex,
    /// The SHA-256s of the index files read.
    pub(crate) read: std::collections::HashSet<[u8; 32]>,
}
