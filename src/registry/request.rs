//! One request to a registry as the router hands it over ([`Ask`]), and what the registry
//! answers ([`Reply`]).

use bytes::Bytes;
use http::HeaderMap;

use super::metadata::Freshness;
use crate::body::ResponseBody;
use crate::store::Digest;

/// What a registry request produced.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A metadata document.
    Document {
        /// Its media type.
        content_type: String,
        /// Its bytes, rewritten for this fetchgate.
        body: Bytes,
        /// Whether the representation depends on `Accept`.
        vary_accept: bool,
        /// How the metadata was had.
        freshness: Freshness,
    },
    /// A verified artifact, in the store under this digest.
    Artifact {
        /// Its SHA-256.
        sha256: Digest,
    },
    /// A verified artifact the front-end already looked up in the store.
    Stored {
        /// The entry.
        object: crate::store::Object,
    },
    /// An artifact on its way into the store, streamed to this client as the fill verifies
    /// it: its last byte goes out only once the check passed (the SHA-256, or the whole
    /// file's own hash), and the body is cut short otherwise.
    Streamed {
        /// Its SHA-256 when it was known before the first byte (a registry published it);
        /// `None` when only the whole file names it (a Go module's `h1:`), so the response
        /// carries no digest headers.
        sha256: Option<Digest>,
        /// Its length, as the upstream announced it.
        length: u64,
        /// The bytes.
        body: ResponseBody,
    },
    /// Another reply with headers of the protocol's own, set over the serve layer's (an exact
    /// upstream `Content-Type`, `Docker-Content-Digest`, an API version).
    WithHeaders {
        /// The reply.
        reply: Box<Reply>,
        /// The headers, each replacing any of its name.
        headers: HeaderMap,
    },
}

impl Reply {
    /// The stored artifact this reply serves, if it serves one.
    pub(crate) fn artifact(&self) -> Option<&Digest> {
        match self {
            Reply::Artifact { sha256 } => Some(sha256),
            Reply::Streamed { sha256, .. } => sha256.as_ref(),
            Reply::Stored { object } => Some(&object.digest),
            Reply::WithHeaders { reply, .. } => reply.artifact(),
            Reply::Document { .. } => None,
        }
    }
}

/// One registry request as the router hands it over.
#[derive(Clone, Debug)]
pub(crate) struct Ask<'a> {
    /// The path below the mount, starting with `/`.
    pub(crate) path: &'a str,
    /// The client's `Accept`.
    pub(crate) accept: Option<&'a str>,
    /// This registry's base URL as the client reaches it, ending in `/`.
    pub(crate) base: &'a str,
    /// `HEAD` rather than `GET` (the serve layer answers only these two).
    pub(crate) head: bool,
    /// The query, if any (the path never holds it).
    pub(crate) query: Option<&'a str>,
    /// The client asked for a byte range (`Range`): served from the store, never streamed.
    pub(crate) range: bool,
}
