//! Where the bucket is and how it is reached, each value of `[shared]` checked on its own:
//! the `s3://bucket/prefix` URL, the endpoint and the CA file. Each error says what is wrong
//! and the next step; the settings table puts it at the field's line.

use std::path::{Path, PathBuf};

use url::Url;

/// Why `url` is not a usable `s3://bucket/prefix`; each says how to write it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum BucketUrlError {
    /// Not an `s3://` URL.
    #[error("`{raw}` is not an s3:// URL; write it as s3://bucket/prefix")]
    NotS3 {
        /// The URL as written.
        raw: String,
    },
    /// The bucket is not a valid bucket name.
    #[error(
        "`{bucket}` is not a bucket name (3 to 63 of a-z, 0-9, `.` and `-`); write it as s3://bucket/prefix"
    )]
    BucketName {
        /// The bucket as written.
        bucket: String,
    },
    /// The prefix holds characters or segments keys may not.
    #[error(
        "the prefix `{prefix}` may hold only a-z, A-Z, 0-9, `.`, `-` and `_` between single slashes; write it as s3://bucket/prefix"
    )]
    Prefix {
        /// The prefix, trimmed of slashes.
        prefix: String,
    },
}

/// The bucket and prefix of `s3://bucket/prefix`.
pub(super) fn bucket_and_prefix(raw: &str) -> Result<(String, String), BucketUrlError> {
    let rest = raw
        .strip_prefix("s3://")
        .ok_or_else(|| BucketUrlError::NotS3 {
            raw: raw.to_string(),
        })?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid_bucket = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if !valid_bucket {
        return Err(BucketUrlError::BucketName {
            bucket: bucket.to_string(),
        });
    }
    let prefix = prefix.trim_matches('/');
    let valid_prefix = prefix.split('/').all(|part| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    });
    if !prefix.is_empty() && !valid_prefix {
        return Err(BucketUrlError::Prefix {
            prefix: prefix.to_string(),
        });
    }
    Ok((bucket.to_string(), prefix.to_string()))
}

/// Why `endpoint` is not one fetchgate will send objects and signatures to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum EndpointError {
    /// Not a URL at all.
    #[error("`{raw}` is not a URL ({source}); write it as https://host:port")]
    NotUrl {
        /// The endpoint as written.
        raw: String,
        /// Why the URL parser refused it.
        #[source]
        source: url::ParseError,
    },
    /// `http://` without `allow_http`.
    #[error(
        "an http:// endpoint sends objects and signatures unencrypted; use https://, or set allow_http = true for a store on a trusted network"
    )]
    PlainHttp,
    /// Neither `http` nor `https`.
    #[error("the scheme `{scheme}` is not http or https")]
    Scheme {
        /// The scheme as parsed.
        scheme: String,
    },
    /// A user name or password in the URL.
    #[error(
        "credentials do not belong in the endpoint; use access_key_id and secret_access_key_file"
    )]
    Credentials,
    /// A path, query or fragment.
    #[error("the endpoint is a scheme, host and port only (no path or query)")]
    NotBare,
}

/// The endpoint, checked: `https`, or `http` with `allow_http`; no credentials, query or
/// fragment.
pub(super) fn endpoint(raw: &str, allow_http: bool) -> Result<String, EndpointError> {
    let url = Url::parse(raw).map_err(|source| EndpointError::NotUrl {
        raw: raw.to_string(),
        source,
    })?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => return Err(EndpointError::PlainHttp),
        other => {
            return Err(EndpointError::Scheme {
                scheme: other.to_string(),
            });
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EndpointError::Credentials);
    }
    if url.query().is_some() || url.fragment().is_some() || url.path() != "/" {
        return Err(EndpointError::NotBare);
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// Why `ca_file` cannot be trusted for the endpoint.
#[derive(Debug, thiserror::Error)]
pub(super) enum CaFileError {
    /// The file cannot be read.
    #[error(
        "cannot read {}: {source}; point ca_file at the PEM file of the store's CA",
        .path.display()
    )]
    Unreadable {
        /// The file, as resolved against the config's directory.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The file is not PEM certificates.
    #[error("{}: not PEM certificates: {source}", .path.display())]
    NotPem {
        /// The file.
        path: PathBuf,
        /// What the PEM reader found.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The file holds no certificate.
    #[error("{} holds no PEM certificate", .path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
}

/// The PEM certificates in `path`: at least one, each parseable.
pub(super) fn ca_pem(path: &Path) -> Result<Vec<u8>, CaFileError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|source| CaFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CaFileError::NotPem {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(CaFileError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(pem)
}
