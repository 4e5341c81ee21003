//! The `kind = "apt"` front-end: a Debian/Ubuntu repository served only as far as its signed
//! index vouches for it. `dists/<suite>/InRelease` (or `Release` + `Release.gpg`) is metadata,
//! verified with the registry's `signed_by` keyring before it is kept or served, and served as
//! the exact verified bytes; every index it lists (and `by-hash/SHA256/<hex>`) is an artifact
//! verified against the Release's SHA-256 and size; every pool file is an artifact verified
//! against the `Packages`/`Sources` stanza that names it. Anything else is
//! `not_in_signed_index`, never passed through.

use super::config::AptSource;
use super::index::Expected;
use super::paths::{AptRequest, ReleaseName, parse_request};
use super::releases::{Form, unframe};
use crate::registry::error::RegistryError;
use std::sync::Arc;

use super::config::AptKeys;
use super::state::Apt;
use crate::registry::core::RegistryCore;
use crate::registry::core::artifact::{Serving, sha256_expected};
use crate::registry::kind::{KindInfo, Reach};
use crate::registry::own_keys::OwnKeys;
use crate::registry::protocol::{Handled, KindFront, KindRow, KindSettings};
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::registry::settings::RegistrySettings;
use crate::store::Digest;
use crate::toml_file::FileError;

/// The `kind = "apt"` row of the registry-kind table: Debian and Ubuntu repositories.
pub(crate) const ROW: KindRow = KindRow {
    info: KindInfo {
        name: "apt",
        canonical: str::to_string,
        bare_token_scheme: Some("Bearer"),
        client_setup: |r| format!("deb [signed-by=<signed_by>] {} <suite> main", r.base()),
        upstream_shape: |u| {
            u.path_segments()
                .is_some_and(|mut s| s.any(|seg| seg == "dists"))
                .then_some(
                    "an apt upstream is the base holding dists/ and pool/ (http://deb.debian.org/debian/), not a folder inside dists/",
                )
        },
    },
    keys: &["signed_by", "suites", "components"],
    read,
};

/// Reads `signed_by` (required), `suites` and `components`.
fn read(keys: &mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError> {
    let signed_by = keys.text("signed_by")?;
    let suites = keys.texts("suites")?;
    let components = keys.texts("components")?;
    let source = AptKeys {
        signed_by: &signed_by,
        suites: &suites,
        components: &components,
    }
    .read(keys.table.clone(), keys.base, keys.src)?;
    Ok(Arc::new(source))
}

impl KindSettings for AptSource {
    fn start(&self) -> Arc<dyn KindFront> {
        Arc::new(AptFront {
            source: self.clone(),
        })
    }

    /// The `sources.list` line with this registry's keyring, a suite and its components.
    fn client_setup(&self, reach: &Reach<'_>) -> Option<String> {
        let suite = self
            .filters
            .suites
            .first()
            .map_or("<suite>", String::as_str);
        let components = match self.filters.components.as_slice() {
            [] => "main".to_string(),
            list => list.join(" "),
        };
        Some(format!(
            "deb [signed-by={}] {} {suite} {components}",
            self.signed_by.display(),
            reach.base()
        ))
    }
}

/// The apt part of one registry: its trust root, filters and what they verified.
struct AptFront {
    source: AptSource,
}

impl KindFront for AptFront {
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a> {
        Box::pin(async move { Apt { core }.apt(front, &self.source, ask).await })
    }

    /// A URL under the registry's `upstream` (apt's `Acquire::http::Proxy`) is this
    /// registry's request: verified against the signed index like `/registry/<name>/`.
    fn claims_url(&self, settings: &RegistrySettings, url: &url::Url) -> Option<String> {
        below(settings, url)
    }
}

/// The label pool and index files carry in the store and in mismatch reports.
const VOUCHED_BY: &str = "signed-index";

impl Apt<'_> {
    async fn apt(
        &self,
        front: &Front,
        source: &AptSource,
        ask: &Ask<'_>,
    ) -> Result<Reply, RegistryError> {
        let raw = ask.path.trim_start_matches('/');
        let request = parse_request(raw, &source.filters).map_err(RegistryError::kind)?;
        match &request {
            AptRequest::Release { suite, name } => {
                self.apt_release_file(front, source, suite, *name).await
            }
            AptRequest::Index { suite, .. } | AptRequest::ByHash { suite, .. } => {
                let suite = self.apt_suite(front, source, suite).await?;
                let expected = suite
                    .index
                    .lock()
                    .map_err(|_| RegistryError::Internal("an apt index lock is poisoned".into()))?
                    .index
                    .expected(&request)
                    .map_err(RegistryError::kind)?;
                self.apt_artifact(front, raw, &expected, Serving::for_ask(ask).whole)
                    .await
            }
            AptRequest::Pool { path } => {
                let expected = self.apt_vouched(front, source, &request).await?;
                self.apt_artifact(front, path, &expected, Serving::for_ask(ask).whole)
                    .await
            }
        }
    }

    /// `InRelease`, `Release` or `Release.gpg`: the exact bytes that verified, judged again
    /// now (a cached Release can pass its `Valid-Until`).
    async fn apt_release_file(
        &self,
        front: &Front,
        source: &AptSource,
        suite: &str,
        name: ReleaseName,
    ) -> Result<Reply, RegistryError> {
        let form = match name {
            ReleaseName::InRelease => Form::Inline,
            ReleaseName::Release | ReleaseName::ReleaseGpg => Form::Detached,
        };
        let (entry, freshness) = self.apt_release_entry(front, source, suite, form).await?;
        if entry.status != 200 {
            let file = match name {
                ReleaseName::InRelease => "InRelease",
                ReleaseName::Release => "Release",
                ReleaseName::ReleaseGpg => "Release.gpg",
            };
            return Err(RegistryError::NotFound(format!("dists/{suite}/{file}")));
        }
        self.apt_judged(front, source, suite, &entry.body, form)
            .await?;
        let body = match (form, name) {
            (Form::Inline, _) => entry.body.clone(),
            (Form::Detached, which) => {
                let (release, signature) = unframe(&entry.body)
                    .ok_or_else(|| RegistryError::Cache("a cached Release is unreadable".into()))?;
                if which == ReleaseName::ReleaseGpg {
                    signature
                } else {
                    release
                }
            }
        };
        Ok(Reply::Document {
            content_type: "application/octet-stream".into(),
            body,
            vary_accept: false,
            freshness,
        })
    }

    /// A file under the repository base, verified against one of `expected` (two indexes
    /// may list a pool file differently): from the store, or fetched and stored only when
    /// its SHA-256 matched; its size is held to the listed one. Asked for `whole` and listed
    /// once, a miss streams to the client while it verifies (the upstream must announce the
    /// listed size): apt pipelines its requests, so each file's wait for a whole fill would
    /// add up. Its last byte goes out only once the SHA-256 matched; a mismatch cuts it short,
    /// and apt reports its own hash mismatch.
    pub(crate) async fn apt_artifact(
        &self,
        front: &Front,
        path: &str,
        expected: &[Expected],
        whole: bool,
    ) -> Result<Reply, RegistryError> {
        let mut last = None;
        for e in expected {
            let serving = Serving {
                whole: whole && expected.len() == 1,
                listed_length: Some(e.size),
            };
            let digest = Digest(e.sha256);
            let upstream = front.settings.upstream.clone();
            let owned = path.to_string();
            let url = move || {
                upstream
                    .join(&owned)
                    .map(|u| u.to_string())
                    .map_err(|err| RegistryError::NotServed(format!("{owned} ({err})")))
            };
            let got = self
                .core
                .artifact(
                    front,
                    &sha256_expected(&digest),
                    url,
                    path,
                    VOUCHED_BY,
                    serving,
                )
                .await;
            match got {
                // Its length was the listed size before its first byte went out.
                Ok(reply @ Reply::Streamed { .. }) => return Ok(reply),
                // Verified in memory from the shared tier (its copy still landing): its own
                // length is the one to check.
                Ok(Reply::Stored { object }) if object.size == e.size => {
                    return Ok(Reply::Stored { object });
                }
                Ok(reply) => {
                    self.apt_size_matches(path, digest, e.size).await?;
                    return Ok(reply);
                }
                Err(err @ RegistryError::DigestMismatch { .. }) => last = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| {
            RegistryError::Internal(format!("{path}: no expected digest to check"))
        }))
    }

    /// Refuses a stored file whose size is not the one the signed index lists.
    async fn apt_size_matches(
        &self,
        path: &str,
        digest: Digest,
        size: u64,
    ) -> Result<(), RegistryError> {
        let store = self.core.fetcher.store().clone();
        let stored = tokio::task::spawn_blocking(move || store.get(&digest).map(|o| o.size))
            .await
            .ok()
            .flatten();
        match stored {
            Some(s) if s == size => Ok(()),
            Some(s) => Err(RegistryError::kind(super::AptError::new(
                super::AptErrorKind::IndexInvalid,
                path,
                format!(
                    "the signed index lists {size} bytes, but the bytes with its SHA-256 are {s}"
                ),
            ))),
            None => Err(RegistryError::Cache(format!(
                "{path} left the store before it was served; retry"
            ))),
        }
    }
}

/// The path of `url` below the apt registry `s`'s upstream (same scheme, host and port, and
/// the upstream's path a prefix), starting with `/`. A query changes nothing: the file is
/// still one the signed index must vouch for.
fn below(s: &RegistrySettings, url: &url::Url) -> Option<String> {
    s.below_upstream(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(upstream: &str) -> RegistrySettings {
        let text =
            format!("[[registry]]\nname = \"deb\"\nkind = \"npm\"\nupstream = \"{upstream}\"\n");
        let config = crate::config::Config::from_toml("t.toml", &text).unwrap();
        config.registries[0].settings.clone()
    }

    #[test]
    fn a_url_is_below_an_upstream_only_on_its_origin_and_under_its_path() {
        let s = settings("http://Mirror.test/debian/");
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert_eq!(
            below(&s, &url("http://mirror.test/debian/dists/stable/InRelease")),
            Some("/dists/stable/InRelease".into())
        );
        assert_eq!(
            below(&s, &url("http://mirror.test:80/debian/pool/a.deb?x=1")),
            Some("/pool/a.deb".into())
        );
        for other in [
            "http://mirror.test/debian-security/dists/stable/InRelease",
            "http://mirror.test/ubuntu/dists/stable/InRelease",
            "https://mirror.test/debian/dists/stable/InRelease",
            "http://mirror.test:8080/debian/dists/stable/InRelease",
            "http://other.test/debian/dists/stable/InRelease",
        ] {
            assert_eq!(below(&s, &url(other)), None, "{other}");
        }
    }
}
