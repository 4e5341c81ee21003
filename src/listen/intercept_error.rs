//! Why the intercept CA's files could not be read, a leaf could not be minted, or a new CA
//! could not be made: each a variant whose text names the file, host or step.

use std::path::PathBuf;

/// A CA key or certificate file that could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PemError {
    /// The file could not be read.
    #[error("cannot read the intercept {what} {}: {source}", path.display())]
    Read {
        /// `CA key` or `CA certificate`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is larger than a PEM file holds.
    #[error("the intercept {what} {} is {len} bytes, more than a PEM file holds", path.display())]
    TooLarge {
        /// `CA key` or `CA certificate`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
}

/// Why no leaf was minted for a host.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeafError {
    /// The host is not in `[intercept] hosts`.
    #[error("`{0}` is not in [intercept] hosts")]
    NotListed(String),
    /// The certificate parameters could not be made.
    #[error("cannot make a leaf: {0}")]
    Params(#[source] rcgen::Error),
    /// The host is not a DNS name a certificate can hold.
    #[error("`{host}` is not a DNS name: {source}")]
    DnsName {
        /// The host.
        host: String,
        /// rcgen's reason.
        source: rcgen::Error,
    },
    /// No key pair for the leaf.
    #[error("cannot make a leaf key: {0}")]
    Key(#[source] rcgen::Error),
    /// The CA could not sign the leaf.
    #[error("cannot sign a leaf for `{host}`: {source}")]
    Sign {
        /// The host.
        host: String,
        /// rcgen's reason.
        source: rcgen::Error,
    },
    /// No TLS server configuration could be built.
    #[error("cannot configure TLS: {0}")]
    Tls(#[source] rustls::Error),
    /// The leaf and its key were refused by rustls.
    #[error("cannot use the leaf for `{host}`: {source}")]
    UseLeaf {
        /// The host.
        host: String,
        /// rustls's reason.
        source: rustls::Error,
    },
}

/// Why no new intercept CA was made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaError {
    /// A host that may not be listed (as given), and why.
    #[error("`{host}`: {why}")]
    Unlistable {
        /// The host as given.
        host: String,
        /// Why it may not be listed.
        why: &'static str,
    },
    /// No hosts at all.
    #[error("name at least one host to intercept (--host registry.npmjs.org)")]
    NoHosts,
    /// The certificate parameters could not be made.
    #[error("cannot make a CA: {0}")]
    Params(#[source] rcgen::Error),
    /// No key pair for the CA.
    #[error("cannot make a CA key: {0}")]
    Key(#[source] rcgen::Error),
    /// The CA could not sign itself.
    #[error("cannot sign the CA: {0}")]
    Sign(#[source] rcgen::Error),
}
