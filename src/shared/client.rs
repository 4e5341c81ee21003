//! The bucket, through `object_store`: key layout, conditional writes, and a time limit on
//! every operation. It knows nothing of the local store; what it returns is untrusted bytes.
//!
//! ```text
//! <prefix>/sha256/<2 hex>/<64 hex>     an object; metadata `size` and `label`
//! <prefix>/alias/sha512/<128 hex>      the sha256 hex of the object those bytes are
//! ```
//!
//! Objects' metadata is `object_meta`; large uploads in parts are `multipart`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    Attribute, AttributeValue, Attributes, BackoffConfig, Certificate, ClientOptions, GetOptions,
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};

pub(crate) mod multipart;
mod object_meta;

use object_meta::{ObjectMeta, attributes};

use super::parts_turn::PartsTurns;
use super::settings::SharedSettings;
use crate::store::{Digest, Source};

/// A stream of body chunks from the bucket.
pub(crate) type Chunks =
    Pin<Box<dyn futures_core::Stream<Item = object_store::Result<Bytes>> + Send + 'static>>;

/// Why a bucket operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BucketError {
    /// No answer within `[shared] timeout_ms`.
    #[error("no answer within [shared] timeout_ms")]
    Timeout,
    /// The store answered with an error, or the connection failed.
    #[error("{0}")]
    Failed(String),
}

impl BucketError {
    /// A bounded label for metrics.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            BucketError::Timeout => "timeout",
            BucketError::Failed(_) => "error",
        }
    }
}

/// An object found in the bucket, its body not read yet.
pub(crate) struct Found {
    /// The length the store reports.
    pub(crate) size: u64,
    /// The `size` metadata, if present and a number.
    pub(crate) claimed_size: Option<u64>,
    /// The `label` metadata, if present and printable.
    pub(crate) label: Option<String>,
    /// Who vouched for the bytes, as the uploading instance recorded it (none if absent).
    /// Not sealed: whoever could forge it can read every object in the bucket anyway.
    pub(crate) sources: Vec<Source>,
    /// The body.
    pub(crate) chunks: Chunks,
}

/// How a conditional write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Put {
    /// This write created the object.
    Created,
    /// An object was already there (another instance's write, or an earlier one): success.
    Existed,
}

/// How a conditional write of a small control object (a lease, a metadata document) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// Written; the store's ETag for it, when it gives one.
    Done(Option<String>),
    /// Its precondition failed: another instance wrote first.
    Lost,
}

/// One bucket and prefix.
pub(crate) struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    timeout: Duration,
    /// One multipart upload per key at a time from this instance.
    parts_turns: PartsTurns,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Bucket {
    /// The bucket `settings` name, reached directly at its endpoint (never through a proxy
    /// taken from the environment), with `object_store`'s own retries off: the
    /// breaker and the upload queue decide when to try again.
    pub(crate) fn open(settings: &SharedSettings) -> Result<Self, BucketError> {
        // reqwest is built without a TLS provider of its own; fetchgate's is ring. Installing
        // it twice is harmless (the first one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // fetchgate's own limit on each operation (and each silence in a body) comes first;
        // the client's are a backstop, so a slow tier is counted as a time-out.
        let backstop = settings.timeout.saturating_mul(2);
        let mut options = ClientOptions::new()
            .with_allow_http(settings.allow_http)
            .with_connect_timeout(backstop)
            .with_read_timeout(backstop)
            .with_timeout_disabled();
        if let Some(pem) = &settings.ca_pem {
            for cert in Certificate::from_pem_bundle(pem)
                .map_err(|e| BucketError::Failed(format!("[shared] ca_file: {e}")))?
            {
                options = options.with_root_certificate(cert);
            }
        }
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 0,
            retry_timeout: settings.timeout,
        };
        let c = &settings.credentials;
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_access_key_id(&c.access_key_id)
            .with_secret_access_key(&c.secret_access_key)
            .with_allow_http(settings.allow_http)
            // AWS itself wants bucket.s3.<region>.amazonaws.com; S3-compatible stores at an
            // operator's endpoint are addressed path-style (endpoint/bucket/key).
            .with_virtual_hosted_style_request(settings.endpoint.is_none())
            .with_client_options(options)
            .with_retry(retry);
        if let Some(token) = &c.session_token {
            builder = builder.with_token(token);
        }
        if let Some(endpoint) = &settings.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let store = builder
            .build()
            .map_err(|e| BucketError::Failed(e.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            prefix: settings.prefix.clone(),
            timeout: settings.timeout,
            parts_turns: PartsTurns::default(),
        })
    }

    /// The key of `digest`'s object.
    pub(crate) fn object_key(&self, digest: &Digest) -> Path {
        let hex = digest.hex();
        self.key(&format!("sha256/{}/{hex}", &hex[..2]))
    }

    /// The key of the alias naming the object whose `algorithm` digest is `hex` (npm's
    /// `sha512`, or legacy `sha1`).
    pub(crate) fn alias_key(&self, algorithm: &str, hex: &str) -> Path {
        self.key(&format!("alias/{algorithm}/{hex}"))
    }

    /// The key of the lease named `name` (a path of its own: `sha256/<hex>`, `meta/<hex>`).
    pub(crate) fn lease_key(&self, name: &str) -> Path {
        self.key(&format!("lease/{name}"))
    }

    /// The key of the shared metadata document named `hex` (the SHA-256 of its cache key).
    pub(crate) fn meta_key(&self, hex: &str) -> Path {
        self.key(&format!("meta/{}/{hex}", &hex[..2.min(hex.len())]))
    }

    /// The prefix under which objects live, for listing.
    pub(crate) fn objects_prefix(&self) -> Path {
        self.key("sha256")
    }

    /// `rest` under the prefix.
    fn key(&self, rest: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(rest)
        } else {
            Path::from(format!("{}/{rest}", self.prefix))
        }
    }

    /// Starts reading `key`: `None` if there is no such object. Only the response head is
    /// bounded here; the caller bounds the silence between chunks.
    pub(crate) async fn get(&self, key: &Path) -> Result<Option<Found>, BucketError> {
        let got = match tokio::time::timeout(
            self.timeout,
            self.store.get_opts(key, GetOptions::default()),
        )
        .await
        {
            Err(_) => return Err(BucketError::Timeout),
            Ok(Err(object_store::Error::NotFound { .. })) => return Ok(None),
            Ok(Err(e)) => return Err(BucketError::Failed(e.to_string())),
            Ok(Ok(got)) => got,
        };
        let meta = ObjectMeta::read(&got.attributes);
        Ok(Some(Found {
            size: got.meta.size,
            claimed_size: meta.claimed_size,
            label: meta.label,
            sources: meta.sources,
            chunks: got.into_stream(),
        }))
    }

    /// A small object whole (at most `max` bytes) with its ETag (empty when the store gives
    /// none): `None` if there is no such object. A larger one is refused.
    pub(crate) async fn get_small(
        &self,
        key: &Path,
        max: usize,
    ) -> Result<Option<(Bytes, String)>, BucketError> {
        let read = async {
            let got = match self.store.get_opts(key, GetOptions::default()).await {
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(BucketError::Failed(e.to_string())),
                Ok(got) => got,
            };
            if got.meta.size > max as u64 {
                return Err(BucketError::Failed(format!(
                    "{key} is {} bytes, more than the {max} a control object may be",
                    got.meta.size
                )));
            }
            let etag = got.meta.e_tag.clone().unwrap_or_default();
            let bytes = got
                .bytes()
                .await
                .map_err(|e| BucketError::Failed(e.to_string()))?;
            Ok(Some((bytes, etag)))
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .unwrap_or(Err(BucketError::Timeout))
    }

    /// The ETag of `key` (empty when the store gives none), `None` when there is no object.
    pub(crate) async fn etag_of(&self, key: &Path) -> Result<Option<String>, BucketError> {
        match tokio::time::timeout(self.timeout, self.store.head(key)).await {
            Err(_) => Err(BucketError::Timeout),
            Ok(Ok(meta)) => Ok(Some(meta.e_tag.unwrap_or_default())),
            Ok(Err(object_store::Error::NotFound { .. })) => Ok(None),
            Ok(Err(e)) => Err(BucketError::Failed(e.to_string())),
        }
    }

    /// Writes the small control object `bytes` to `key`: only if none is there (`replacing`
    /// is `None`, `If-None-Match: *`), or only over the version whose ETag is `replacing`
    /// (`If-Match`).
    pub(crate) async fn put_conditional(
        &self,
        key: &Path,
        bytes: Bytes,
        replacing: Option<&str>,
    ) -> Result<Written, BucketError> {
        let mode = match replacing {
            None => PutMode::Create,
            Some(etag) => PutMode::Update(object_store::UpdateVersion {
                e_tag: Some(etag.to_string()),
                version: None,
            }),
        };
        let mut attributes = Attributes::new();
        attributes.insert(
            Attribute::ContentType,
            AttributeValue::from("application/octet-stream"),
        );
        let options = PutOptions {
            mode,
            attributes,
            ..PutOptions::default()
        };
        let put = self.store.put_opts(key, PutPayload::from(bytes), options);
        match tokio::time::timeout(self.timeout, put).await {
            Err(_) => Err(BucketError::Timeout),
            Ok(Ok(result)) => Ok(Written::Done(result.e_tag)),
            Ok(Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotModified { .. },
            )) => Ok(Written::Lost),
            Ok(Err(e)) => Err(BucketError::Failed(e.to_string())),
        }
    }

    /// Writes the small control object `bytes` to `key` whatever is there.
    pub(crate) async fn put_overwrite(&self, key: &Path, bytes: Bytes) -> Result<(), BucketError> {
        let put = self.store.put(key, PutPayload::from(bytes));
        match tokio::time::timeout(self.timeout, put).await {
            Err(_) => Err(BucketError::Timeout),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(BucketError::Failed(e.to_string())),
        }
    }

    /// Removes `key` (a missing object is no failure).
    pub(crate) async fn delete(&self, key: &Path) -> Result<(), BucketError> {
        match tokio::time::timeout(self.timeout, self.store.delete(key)).await {
            Err(_) => Err(BucketError::Timeout),
            Ok(Ok(())) | Ok(Err(object_store::Error::NotFound { .. })) => Ok(()),
            Ok(Err(e)) => Err(BucketError::Failed(e.to_string())),
        }
    }

    /// Whether `key` exists.
    pub(crate) async fn exists(&self, key: &Path) -> Result<bool, BucketError> {
        let head = GetOptions {
            head: true,
            ..GetOptions::default()
        };
        match tokio::time::timeout(self.timeout, self.store.get_opts(key, head)).await {
            Err(_) => Err(BucketError::Timeout),
            Ok(Ok(_)) => Ok(true),
            // A missing object is an answer, not a failure.
            Ok(Err(object_store::Error::NotFound { .. })) => Ok(false),
            Ok(Err(e)) => Err(BucketError::Failed(e.to_string())),
        }
    }

    /// Writes `bytes` to `key` only if nothing is there (`If-None-Match: *`); an object
    /// already there is success.
    pub(crate) async fn put_new(
        &self,
        key: &Path,
        bytes: Bytes,
        label: Option<&str>,
        sources: &[Source],
    ) -> Result<Put, BucketError> {
        let options = PutOptions {
            mode: PutMode::Create,
            attributes: attributes(bytes.len() as u64, label, sources),
            ..PutOptions::default()
        };
        let put = self.store.put_opts(key, PutPayload::from(bytes), options);
        match tokio::time::timeout(self.timeout, put).await {
            Err(_) => Err(BucketError::Timeout),
            Ok(Ok(_)) => Ok(Put::Created),
            Ok(Err(object_store::Error::AlreadyExists { .. })) => Ok(Put::Existed),
            Ok(Err(e)) => Err(BucketError::Failed(e.to_string())),
        }
    }

    /// Objects and bytes under the objects prefix, counting at most `cap` objects.
    pub(crate) async fn census(&self, cap: usize) -> Result<(u64, u64, bool), BucketError> {
        let prefix = self.objects_prefix();
        let mut list = self.store.list(Some(&prefix));
        let (mut objects, mut bytes) = (0u64, 0u64);
        loop {
            let next = std::future::poll_fn(|cx| list.as_mut().poll_next(cx));
            match tokio::time::timeout(self.timeout, next).await {
                Err(_) => return Err(BucketError::Timeout),
                Ok(None) => return Ok((objects, bytes, false)),
                Ok(Some(Err(e))) => return Err(BucketError::Failed(e.to_string())),
                Ok(Some(Ok(meta))) => {
                    objects += 1;
                    bytes += meta.size;
                    if objects as usize >= cap {
                        return Ok((objects, bytes, true));
                    }
                }
            }
        }
    }
}
