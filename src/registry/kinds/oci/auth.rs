//! Upstream Bearer auth for an `oci` registry: the challenge is learnt once per registry from
//! the upstream's `/v2/` (`401` with `WWW-Authenticate: Bearer realm=...`), a pull token is
//! asked of the realm per repository scope (anonymously, or with the `credentials_file`
//! credential, which then goes only to the realm) and kept until it expires. The realm is
//! fetched like any upstream (decided, pinned), and the token is a [`Credential`] of the
//! upstream's own origin, so the fetcher never sends it to a redirect elsewhere (a CDN, S3).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};
use http::{HeaderMap, StatusCode};

use super::challenge::{
    BearerChallenge, MAX_TOKEN_RESPONSE_BYTES, bearer_challenge, parse_token_response, pull_scope,
};
use super::state::Oci;
use crate::fetch::Fetcher;
use crate::fetch::expected::MetaResponse;
use crate::fetch::flight::Ask;
use crate::fetch::hops::{Credential, GetRequest};
use crate::metrics::Metrics;
use crate::registry::settings::Front;

impl Oci<'_> {
    /// `front` as it must reach the upstream for `repository`: unchanged when the upstream
    /// asks for no token (or cannot be asked now: a cached answer may still serve), else with
    /// a pull token for the upstream's own origin in place of its credential, or with no
    /// credential at all when the realm gave none (the `credentials_file` credential goes to
    /// the realm only; `/v2/` is probed without it).
    pub(super) async fn authorised(&self, front: &Front, repository: &str) -> Option<Front> {
        let s = &front.settings;
        if s.offline {
            return None;
        }
        // Keyed by what the token is worth: this registry, upstream and credential (two
        // configurations in one process never lend each other a token).
        let credential = s.credential.as_ref().map_or_else(String::new, |v| {
            crate::store::Digest::of(v.as_bytes()).hex()
        });
        let registry = format!("{} {} {credential}", s.name, s.upstream);
        let challenge = self.challenge(front, &registry).await?;
        let scope = pull_scope(repository);
        let key = format!("{registry} {scope}");
        let auth = self.state.auth.clone();
        let cached = auth.remembered_token(&key).map(|(v, _)| v);
        let value = match cached {
            Some(v) => v,
            None => {
                // One token request per scope, however many pulls ask at once.
                let asking = TokenAsk {
                    fetcher: self.core.fetcher.clone(),
                    registry: s.name.clone(),
                    credential: s.credential.clone(),
                    challenge,
                    scope,
                };
                // The token is remembered inside the flight, before it lands: a pull that
                // arrives between the flight's end and a later insert would ask again.
                let fetch = || {
                    let (asking, key, auth) = (asking.clone(), key.clone(), auth.clone());
                    async move {
                        // A pull that looked before the last flight's token was remembered and
                        // asks after that flight landed leads a new one: it finds the token.
                        if let Some(known) = auth.remembered_token(&key) {
                            return Ok(known);
                        }
                        let (value, lifetime) = asking.run().await.ok_or(())?;
                        auth.remember_token(key, value.clone(), Instant::now() + lifetime);
                        Ok((value, lifetime))
                    }
                };
                let Ok((value, _)) = auth
                    .flights
                    .tokens
                    .fly(once(&key, self.core.fetcher.metrics()), fetch, |_| ())
                    .await
                else {
                    // No token: the upstream is asked anonymously. The operator's credential
                    // is for the realm, never for the registry that named it.
                    return Some(Front {
                        settings: s.clone(),
                        credential: None,
                    });
                };
                value
            }
        };
        Some(Front {
            settings: s.clone(),
            credential: Some(Credential {
                origin: s.upstream.origin(),
                value,
            }),
        })
    }

    /// The upstream's Bearer challenge, learnt from `/v2/` once per registry.
    async fn challenge(&self, front: &Front, registry: &str) -> Option<BearerChallenge> {
        let auth = self.state.auth.clone();
        if let Some(known) = auth.remembered_challenge(registry) {
            return known;
        }
        let probe = Probe {
            fetcher: self.core.fetcher.clone(),
            url: front.settings.upstream.join("v2/").ok()?,
            registry: front.settings.name.clone(),
        };
        // One probe per registry, however many pulls ask at once; a failed one is not kept.
        // Remembered inside the flight, before it lands, as tokens are.
        let fetch = || {
            let (probe, registry, auth) = (probe.clone(), registry.to_string(), auth.clone());
            async move {
                // Looked before the last probe's answer was remembered, asking after its
                // flight landed: the answer is here now.
                if let Some(known) = auth.remembered_challenge(&registry) {
                    return Ok(known);
                }
                let found = probe.run().await.ok_or(())?;
                auth.remember_challenge(registry, found.clone());
                Ok(found)
            }
        };
        auth.flights
            .probes
            .fly(once(registry, self.core.fetcher.metrics()), fetch, |_| ())
            .await
            .ok()?
    }
}

/// A single-flight ask for `key`, which is its own one source.
fn once(key: &str, metrics: &Arc<Metrics>) -> Ask<String, String> {
    Ask {
        key: key.to_string(),
        source: key.to_string(),
        hedge: Duration::ZERO,
        metrics: metrics.clone(),
    }
}

/// One `/v2/` probe, owned so that it runs on its flight's task.
#[derive(Clone)]
struct Probe {
    fetcher: Arc<Fetcher>,
    url: url::Url,
    registry: String,
}

impl Probe {
    /// What the upstream's `/v2/` asks for (`Some(None)`: no Bearer token); `None` when it
    /// could not be asked.
    async fn run(self) -> Option<Option<BearerChallenge>> {
        let also = [StatusCode::UNAUTHORIZED];
        let req = GetRequest {
            url: self.url.as_str(),
            method: http::Method::GET,
            headers: HeaderMap::new(),
            // Anonymous: the challenge says where a credential may go; before it, nowhere.
            credential: None,
            also: &also,
            max: MAX_TOKEN_RESPONSE_BYTES as u64,
            exact: None,
        };
        let timeout = self.fetcher.fetch_timeout();
        let (response, _) = tokio::time::timeout(timeout, self.fetcher.get(req))
            .await
            .ok()?
            .ok()?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Some(None);
        }
        let values = response
            .headers()
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok());
        match bearer_challenge(values) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(registry = %self.registry, error = %e, "unusable upstream challenge");
                Some(None)
            }
        }
    }
}

/// One token request, owned so that it runs on its flight's task.
#[derive(Clone)]
struct TokenAsk {
    fetcher: Arc<Fetcher>,
    registry: String,
    /// The operator's `credentials_file` credential, for the realm only.
    credential: Option<HeaderValue>,
    challenge: BearerChallenge,
    scope: String,
}

impl TokenAsk {
    /// A pull token for the scope from the challenge's realm, and how long it may be used.
    async fn run(self) -> Option<(HeaderValue, Duration)> {
        let url = self
            .challenge
            .token_url_for(std::slice::from_ref(&self.scope));
        // The operator's credential goes to the realm the upstream named, and only there.
        let credential = self.credential.clone().map(|value| Credential {
            origin: url.origin(),
            value,
        });
        let answer = self
            .fetcher
            .get_metadata(
                url.as_str(),
                HeaderMap::new(),
                credential.as_ref(),
                MAX_TOKEN_RESPONSE_BYTES as u64,
            )
            .await;
        let body = match answer {
            Ok(MetaResponse::Ok { body, .. }) => body,
            Ok(_) => return None,
            Err(f) => {
                tracing::warn!(registry = %self.registry, code = f.code.as_str(), detail = %f.detail, "token request failed");
                return None;
            }
        };
        let token = match parse_token_response(&body) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(registry = %self.registry, error = %e, "unusable token response");
                return None;
            }
        };
        let mut value = HeaderValue::from_str(&format!("Bearer {}", token.value)).ok()?;
        value.set_sensitive(true);
        Some((value, token.lifetime))
    }
}
