//! Why an OCI request, path, manifest or challenge was refused: each failure has a stable
//! code, an HTTP status, the side it came from and the field that failed; `serve/problem.rs`
//! remains the one place that turns it into a response.

use std::borrow::Cow;

use crate::errors::Origin;
use crate::registry::error::KindError;

/// An OCI failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OciError {
    /// A repository name outside the distribution-spec grammar or length cap.
    InvalidName {
        /// The name as given (checked text only, never a credential).
        name: String,
        /// Which rule it broke.
        why: &'static str,
    },
    /// A tag outside `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
    InvalidTag(String),
    /// Not `sha256:<64 lowercase hex>`.
    InvalidDigest {
        /// The digest as given.
        digest: String,
        /// Which rule it broke.
        why: &'static str,
    },
    /// A path this front-end does not serve (`_catalog`, `referrers`, anything not `/v2/...`).
    NotServed(String),
    /// A write (push, mount, delete): this front-end is read-only.
    ReadOnly {
        /// The method.
        method: String,
        /// The path.
        path: String,
    },
    /// A query parameter with a bad value (`n`, `last`).
    InvalidQuery {
        /// The parameter.
        field: &'static str,
        /// Which rule it broke.
        why: &'static str,
    },
    /// A manifest larger than the manifest cap.
    ManifestTooLarge {
        /// Its size, as announced or as counted.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// A manifest or index that is not what it claims to be.
    InvalidManifest {
        /// The JSON field that failed (`layers[2].digest`).
        field: String,
        /// Which rule it broke.
        why: String,
    },
    /// The upstream answered a manifest of a media type the client's `Accept` does not list
    /// (distribution answers `404` itself in that case; an upstream that ignores `Accept` is
    /// not followed into handing a client what it cannot read).
    NotAccepted {
        /// The manifest's media type.
        media_type: String,
    },
    /// The upstream has no such manifest (`404`), said with the upstream's shape in mind: a
    /// registry whose every manifest is missing is usually one whose `upstream` ends in `/v2/`
    /// or names the wrong host.
    ManifestUnknown {
        /// `name:tag` or `name@digest`.
        reference: String,
        /// The registry's upstream, redacted.
        upstream: String,
    },
    /// An upstream `WWW-Authenticate` or token response fetchgate cannot use.
    InvalidChallenge {
        /// The parameter or member that failed.
        field: &'static str,
        /// Which rule it broke.
        why: String,
    },
}

impl OciError {
    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            OciError::InvalidName { .. } => "oci_name_invalid",
            OciError::InvalidTag(_) => "oci_tag_invalid",
            OciError::InvalidDigest { .. } => "oci_digest_invalid",
            OciError::NotServed(_) => "registry_path_not_served",
            OciError::ReadOnly { .. } => "oci_read_only",
            OciError::InvalidQuery { .. } => "oci_query_invalid",
            OciError::ManifestTooLarge { .. } => "oci_manifest_too_large",
            OciError::InvalidManifest { .. } => "oci_manifest_invalid",
            OciError::InvalidChallenge { .. } => "oci_auth_challenge_invalid",
            OciError::NotAccepted { .. } => "oci_manifest_not_accepted",
            // The code every kind answers a missing package with.
            OciError::ManifestUnknown { .. } => "package_not_found",
        }
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> u16 {
        match self {
            OciError::InvalidName { .. }
            | OciError::InvalidTag(_)
            | OciError::InvalidDigest { .. }
            | OciError::InvalidQuery { .. } => 400,
            OciError::NotServed(_)
            | OciError::NotAccepted { .. }
            | OciError::ManifestUnknown { .. } => 404,
            OciError::ReadOnly { .. } => 405,
            OciError::ManifestTooLarge { .. }
            | OciError::InvalidManifest { .. }
            | OciError::InvalidChallenge { .. } => 502,
        }
    }

    /// Whose side to fix. A digest or name read from an upstream manifest is reported as
    /// [`OciError::InvalidManifest`], so the reference errors are always the client's.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            OciError::ManifestTooLarge { .. }
            | OciError::InvalidManifest { .. }
            | OciError::InvalidChallenge { .. }
            | OciError::ManifestUnknown { .. } => Origin::Upstream,
            _ => Origin::Downstream,
        }
    }

    #[cfg(test)]
    /// The field that failed, for the problem body.
    pub(crate) fn field(&self) -> String {
        match self {
            OciError::InvalidName { .. } => "name".into(),
            OciError::InvalidTag(_) => "tag".into(),
            OciError::InvalidDigest { .. } => "digest".into(),
            OciError::NotServed(_) | OciError::ReadOnly { .. } => "path".into(),
            OciError::InvalidQuery { field, .. } | OciError::InvalidChallenge { field, .. } => {
                (*field).into()
            }
            OciError::ManifestTooLarge { .. } => "manifest".into(),
            OciError::InvalidManifest { field, .. } => field.clone(),
            OciError::NotAccepted { .. } => "accept".into(),
            OciError::ManifestUnknown { .. } => "reference".into(),
        }
    }

    /// [`Self::field`] where it is one fixed name (a manifest's failing member is in the
    /// detail instead).
    pub(crate) fn static_field(&self) -> Option<&'static str> {
        match self {
            OciError::InvalidName { .. } => Some("name"),
            OciError::InvalidTag(_) => Some("tag"),
            OciError::InvalidDigest { .. } => Some("digest"),
            OciError::NotServed(_) | OciError::ReadOnly { .. } => Some("path"),
            OciError::InvalidQuery { field, .. } | OciError::InvalidChallenge { field, .. } => {
                Some(field)
            }
            OciError::ManifestTooLarge { .. } | OciError::InvalidManifest { .. } => {
                Some("manifest")
            }
            OciError::NotAccepted { .. } => Some("accept"),
            OciError::ManifestUnknown { .. } => Some("reference"),
        }
    }

    /// The safe next action.
    pub(crate) fn next(&self) -> &'static str {
        match self {
            OciError::InvalidName { .. } | OciError::InvalidTag(_) => {
                "use a repository name and tag as the OCI distribution spec writes them"
            }
            OciError::InvalidDigest { .. } => {
                "name content as sha256:<64 lowercase hex>; other algorithms are not served"
            }
            OciError::NotServed(_) => {
                "pull with GET or HEAD on /v2/<name>/manifests/<ref>, /v2/<name>/blobs/<digest> or /v2/<name>/tags/list"
            }
            OciError::ReadOnly { .. } => {
                "push to the upstream registry itself; this mirror only pulls"
            }
            OciError::InvalidQuery { .. } => "send n as a positive number and last as a tag",
            OciError::ManifestTooLarge { .. } | OciError::InvalidManifest { .. } => {
                "ask the upstream's operator; nothing was stored or served"
            }
            OciError::InvalidChallenge { .. } => {
                "check the upstream's token service; no credential was sent anywhere"
            }
            OciError::NotAccepted { .. } => {
                "list the manifest's media type in Accept, or pull the platform's manifest by digest"
            }
            OciError::ManifestUnknown { .. } => {
                "check the repository and tag (on Docker Hub `alpine` is `library/alpine`); if every pull is 404, check the registry's upstream: the registry root without /v2/, such as https://registry-1.docker.io/"
            }
        }
    }
}

impl std::fmt::Display for OciError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OciError::InvalidName { name, why } => write!(f, "repository name {name:?}: {why}"),
            OciError::InvalidTag(t) => {
                write!(f, "tag {t:?} is not [a-zA-Z0-9_][a-zA-Z0-9._-]{{0,127}}")
            }
            OciError::InvalidDigest { digest, why } => write!(f, "digest {digest:?}: {why}"),
            OciError::NotServed(p) => write!(f, "{p} is not served by an OCI mirror"),
            OciError::ReadOnly { method, path } => {
                write!(f, "{method} {path}: this mirror is read-only")
            }
            OciError::InvalidQuery { field, why } => write!(f, "query parameter {field}: {why}"),
            OciError::ManifestTooLarge { size, limit } => write!(
                f,
                "a manifest of {size} bytes exceeds the cap of {limit} bytes"
            ),
            OciError::InvalidManifest { field, why } => write!(f, "manifest {field}: {why}"),
            OciError::ManifestUnknown {
                reference,
                upstream,
            } => write!(
                f,
                "the upstream {upstream} has no manifest {reference} (fetchgate asks it for <upstream>v2/<name>/manifests/<reference>)"
            ),
            OciError::InvalidChallenge { field, why } => {
                write!(f, "upstream auth {field}: {why}")
            }
            OciError::NotAccepted { media_type } => write!(
                f,
                "the upstream's manifest is {media_type}, which the request's Accept does not list"
            ),
        }
    }
}

impl std::error::Error for OciError {}

impl KindError for OciError {
    fn code(&self) -> &'static str {
        OciError::code(self)
    }
    fn status(&self) -> u16 {
        OciError::status(self)
    }
    fn origin(&self) -> Origin {
        OciError::origin(self)
    }
    fn field(&self) -> Option<Cow<'static, str>> {
        self.static_field().map(Cow::Borrowed)
    }
    fn next(&self) -> &'static str {
        OciError::next(self)
    }
}
