//! What one `oci` registry keeps between requests (its upstream's token flow, its manifest
//! reads in flight), and [`Oci`], the registry core at work for one request with that state.
//! Each file of the kind adds the methods of its part to [`Oci`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::header::HeaderValue;

use super::challenge::BearerChallenge;
use crate::fetch::flight::Table;
use crate::registry::core::RegistryCore;
use crate::registry::error::RegistryError;

/// The most challenges and tokens remembered (registries × repositories); past it, the
/// oldest-expiring half is dropped.
const MAX_REMEMBERED: usize = 4096;

/// Manifest reads in flight, by registry and URL (which holds the digest).
pub(super) type ManifestFlights =
    Table<String, String, Result<crate::store::Digest, RegistryError>>;

/// The `oci` part of one registry: what it keeps between requests.
#[derive(Default)]
pub(super) struct OciFront {
    /// The upstream's challenge, pull tokens and token requests in flight.
    pub(super) auth: Arc<AuthState>,
    /// Manifest reads by digest in flight.
    pub(super) manifests: Arc<ManifestFlights>,
}

/// The registry core at work for one `oci` request, with the registry's own state.
pub(super) struct Oci<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
    /// What this registry keeps.
    pub(super) state: &'a OciFront,
}

/// What one `oci` registry remembers of its upstream's token flow: the challenge its `/v2/`
/// answered, the pull tokens by scope, and the requests of the flow in flight.
#[derive(Default)]
pub(super) struct AuthState {
    /// What the upstream asked for: `None` when `/v2/` answered without a challenge.
    challenges: Mutex<HashMap<String, Option<BearerChallenge>>>,
    /// Pull tokens by registry and scope, with when they stop being used.
    tokens: Mutex<HashMap<String, (HeaderValue, Instant)>>,
    /// The upstream requests of the token flow in flight.
    pub(super) flights: AuthFlights,
}

/// A flight of the token flow, keyed by what it asks.
type Flight<T> = Arc<Table<String, String, Result<T, ()>>>;

/// The upstream requests of the token flow in flight: `/v2/` probes by registry, token
/// requests by registry and scope.
#[derive(Default)]
pub(super) struct AuthFlights {
    pub(super) probes: Flight<Option<BearerChallenge>>,
    pub(super) tokens: Flight<(HeaderValue, Duration)>,
}

impl AuthState {
    /// What `registry`'s `/v2/` answered, if it was asked (`Some(None)`: no Bearer token).
    pub(super) fn remembered_challenge(&self, registry: &str) -> Option<Option<BearerChallenge>> {
        self.challenges.lock().ok()?.get(registry).cloned()
    }

    /// Keeps what `registry`'s `/v2/` answered, forgetting every answer when the table is
    /// full.
    pub(super) fn remember_challenge(&self, registry: String, found: Option<BearerChallenge>) {
        if let Ok(mut c) = self.challenges.lock() {
            if c.len() >= MAX_REMEMBERED {
                c.clear();
            }
            c.insert(registry, found);
        }
    }

    /// The token kept for `key`, with the time it has left, unless it has expired.
    pub(super) fn remembered_token(&self, key: &str) -> Option<(HeaderValue, Duration)> {
        let now = Instant::now();
        let t = self.tokens.lock().ok()?;
        let (value, until) = t.get(key).filter(|(_, until)| *until > now)?;
        Some((value.clone(), until.saturating_duration_since(now)))
    }

    /// Keeps `value` for `key` until `until`, dropping expired tokens when the table is full.
    pub(super) fn remember_token(&self, key: String, value: HeaderValue, until: Instant) {
        if let Ok(mut t) = self.tokens.lock() {
            if t.len() >= MAX_REMEMBERED {
                let now = Instant::now();
                t.retain(|_, (_, until)| *until > now);
            }
            t.insert(key, (value, until));
        }
    }
}
