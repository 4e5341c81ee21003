//! Who vouched for an entry's bytes. Digests are weak secrets (lockfiles, SBOMs and CI logs
//! print them), so holding the digest must not be enough to read bytes a registry fetched for
//! someone else: an entry remembers whether it was fetched by URL with no registry involved
//! ([`Source::Direct`]) and which registries (and, for OCI, which repositories) served it. A
//! read by digest for a client held to some registries, and a hit through a registry, check
//! this list; the store itself knows nothing of registries or policies beyond these names.

use serde::{Deserialize, Serialize};

/// A registry that served an entry's bytes, and the part of it that did (an OCI repository),
/// when access there is narrower than the whole registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Voucher {
    /// The `[[registry]] name`.
    pub registry: String,
    /// The repository within it, for a kind whose upstream keeps access per repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Voucher {
    /// The whole registry `registry`.
    pub fn registry(registry: &str) -> Self {
        Self {
            registry: registry.to_string(),
            scope: None,
        }
    }

    /// `scope` (an OCI repository) of registry `registry`.
    pub fn scoped(registry: &str, scope: &str) -> Self {
        Self {
            registry: registry.to_string(),
            scope: Some(scope.to_string()),
        }
    }
}

/// Where an entry's bytes were vouched for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Fetched by URL (fetch-through, the forward proxy's tee, LOVE and packs): bytes any
    /// client allowed to fetch by URL could have had.
    Direct,
    /// Served by this registry.
    Registry(Voucher),
}

/// Most sources remembered per entry; past it the oldest registry is dropped first (the
/// entry is then fetched again through it, never served unvouched).
pub(crate) const MAX_SOURCES: usize = 16;

/// The text form kept in the shared tier's object metadata: `*` for [`Source::Direct`],
/// `<registry>` or `<registry> <scope>` otherwise, comma-separated. Registry names hold no
/// space or comma, and OCI repository names neither.
pub(crate) fn to_text(sources: &[Source]) -> String {
    let mut parts = Vec::with_capacity(sources.len());
    for s in sources {
        parts.push(match s {
            Source::Direct => "*".to_string(),
            Source::Registry(Voucher {
                registry,
                scope: None,
            }) => registry.clone(),
            Source::Registry(Voucher {
                registry,
                scope: Some(scope),
            }) => format!("{registry} {scope}"),
        });
    }
    parts.join(",")
}

/// The sources [`to_text`] wrote; a part that is not one is left out (it vouches for nothing).
pub(crate) fn from_text(text: &str) -> Vec<Source> {
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b',');
    text.split(',')
        .filter_map(|part| match part.split_once(' ') {
            None if part == "*" => Some(Source::Direct),
            None if plain(part) => Some(Source::Registry(Voucher::registry(part))),
            Some((r, scope)) if plain(r) && plain(scope) => {
                Some(Source::Registry(Voucher::scoped(r, scope)))
            }
            _ => None,
        })
        .take(MAX_SOURCES)
        .collect()
}

/// Adds `source` to `sources` as the most recent (at most [`MAX_SOURCES`], oldest first out).
pub(crate) fn remember(sources: &mut Vec<Source>, source: Source) {
    if sources.contains(&source) {
        return;
    }
    sources.push(source);
    if sources.len() > MAX_SOURCES {
        sources.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_reads_back_and_drops_what_is_not_a_source() {
        let all = vec![
            Source::Direct,
            Source::Registry(Voucher::registry("npm")),
            Source::Registry(Voucher::scoped("hub", "library/alpine")),
        ];
        assert_eq!(to_text(&all), "*,npm,hub library/alpine");
        assert_eq!(from_text(&to_text(&all)), all);
        // Adversarial twin: a spliced or empty part vouches for nothing.
        assert_eq!(from_text(""), vec![]);
        assert_eq!(from_text("a b c,,\u{7f}x, npm"), vec![]);
    }

    proptest::proptest! {
        /// Whatever a bucket object's metadata holds, what is read from it writes back to text
        /// that reads the same (the sources an instance passes on are the ones it trusts).
        #[test]
        fn metadata_text_reads_back_to_what_it_said(text in "[ -~]{0,80}") {
            let read = from_text(&text);
            proptest::prop_assert_eq!(from_text(&to_text(&read)), read);
        }

        /// Sources with registry names and OCI repositories survive the text form.
        #[test]
        fn sources_survive_the_text_form(
            names in proptest::collection::vec(("[a-z0-9._-]{1,12}", proptest::option::of("[a-z0-9]{1,8}(/[a-z0-9._-]{1,8}){0,2}")), 0..6),
            direct in proptest::bool::ANY,
        ) {
            let mut all: Vec<Source> = names
                .iter()
                .map(|(r, scope)| Source::Registry(Voucher { registry: r.clone(), scope: scope.clone() }))
                .collect();
            if direct {
                all.insert(0, Source::Direct);
            }
            proptest::prop_assert_eq!(from_text(&to_text(&all)), all);
        }
    }

    #[test]
    fn remembering_keeps_each_source_once_and_drops_the_oldest() {
        let mut s = vec![];
        for i in 0..(MAX_SOURCES + 2) {
            remember(
                &mut s,
                Source::Registry(Voucher::registry(&format!("r{i}"))),
            );
        }
        remember(&mut s, Source::Registry(Voucher::registry("r5")));
        assert_eq!(s.len(), MAX_SOURCES);
        assert_eq!(s[0], Source::Registry(Voucher::registry("r2")));
    }
}
