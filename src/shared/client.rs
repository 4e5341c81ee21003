//! The bucket, through `object_store`: key layout, conditional writes, and a time limit on
//! every operation. It knows nothing of the local store; what it returns is untrusted bytes.
//!
//! ```text
//! <prefix>/sha256/<2 hex>/<64 hex>     an object; metadata `size` and `label`
//! <prefix>/alias/sha512/<128 hex>      the sha256 hex of the object those bytes are
//! ```

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    Attribute, AttributeValue, Attributes, BackoffConfig, Certificate, ClientOptions, GetOptions,
    ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, RetryConfig,
    WriteMultipart,
};
use std::io::Read;

use super::parts_turn::PartsTurns;
use super::settings::SharedSettings;
use crate::store::{Digest, Source, sources_from_text, sources_to_text};

/// A stream of body chunks from the bucket.
pub(crate) type Chunks =
    Pin<Box<dyn futures_core::Stream<Item = object_store::Result<Bytes>> + Send + 'static>>;

/// Metadata key holding an object's size.
const META_SIZE: &str = "size";
/// Metadata key holding an object's package label.
const META_LABEL: &str = "label";
/// Longest label kept in metadata.
const MAX_LABEL: usize = 200;
/// Metadata key naming who vouched for an object ([`crate::store::Source`]s, as text).
const META_SOURCES: &str = "sources";
/// Longest sources text kept in metadata (S3 allows 2 KiB of metadata in all): past it the
/// oldest are left out, so an instance reading the object fetches through those again.
const MAX_SOURCES_TEXT: usize = 1024;
/// Objects larger than this are uploaded in parts from their file instead of from memory.
pub(crate) const SINGLE_PUT_MAX: u64 = 64 << 20;
/// The size of one part of a multipart upload.
const PART: usize = 8 << 20;

/// Why a bucket operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BucketError {
    /// No answer within `[shared] timeout_ms`.
    Timeout,
    /// The store answered with an error, or the connection failed.
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

impl std::fmt::Display for BucketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BucketError::Timeout => f.write_str("no answer within [shared] timeout_ms"),
            BucketError::Failed(e) => f.write_str(e),
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
        let meta = |k: &'static str| {
            got.attributes
                .get(&Attribute::Metadata(k.into()))
                .map(|v| v.as_ref().to_string())
        };
        let claimed_size = meta(META_SIZE).and_then(|s| s.parse().ok());
        let label = meta(META_LABEL).and_then(clean_label);
        let sources = meta(META_SOURCES)
            .map(|t| sources_from_text(&t))
            .unwrap_or_default();
        Ok(Some(Found {
            size: got.meta.size,
            claimed_size,
            label,
            sources,
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

    /// Writes the `size` bytes of `file` to `key` in parts of [`PART`], holding at most two
    /// parts in memory, unless an object is already there. A multipart upload cannot be
    /// conditional, but it is still whole or absent (the object appears only when the upload
    /// completes), and two instances racing on one key write the same bytes: the last
    /// complete wins and nothing is torn; within this instance, writers of one key take
    /// turns, so the second finds the first's object. Each part waits at most `timeout_ms`.
    pub(crate) async fn put_new_from_file(
        &self,
        key: &Path,
        file: std::fs::File,
        size: u64,
        label: Option<&str>,
        sources: &[Source],
    ) -> Result<Put, BucketError> {
        let _turn = self.parts_turns.take(key.as_ref()).await;
        if self.exists(key).await? {
            return Ok(Put::Existed);
        }
        let options = PutMultipartOptions {
            attributes: attributes(size, label, sources),
            ..PutMultipartOptions::default()
        };
        let upload =
            match tokio::time::timeout(self.timeout, self.store.put_multipart_opts(key, options))
                .await
            {
                Err(_) => return Err(BucketError::Timeout),
                Ok(r) => r.map_err(|e| BucketError::Failed(e.to_string()))?,
            };
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
        match self.send_parts(&mut writer, file, size).await {
            Ok(()) => match tokio::time::timeout(self.timeout, writer.finish()).await {
                Err(_) => Err(BucketError::Timeout),
                Ok(r) => r
                    .map(|_| Put::Created)
                    .map_err(|e| BucketError::Failed(e.to_string())),
            },
            Err(e) => {
                let _ = tokio::time::timeout(self.timeout, writer.abort()).await;
                Err(e)
            }
        }
    }

    /// Reads `file` a part at a time (off the async workers) into `writer`.
    async fn send_parts(
        &self,
        writer: &mut WriteMultipart,
        file: std::fs::File,
        size: u64,
    ) -> Result<(), BucketError> {
        let mut file = Some(file);
        let mut left = size;
        while left > 0 {
            let want = usize::try_from(left.min(PART as u64)).unwrap_or(PART);
            let Some(mut f) = file.take() else {
                return Err(BucketError::Failed("the local file was lost".into()));
            };
            let read = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; want];
                f.read_exact(&mut buf).map(|()| (f, buf))
            })
            .await
            .map_err(|e| BucketError::Failed(e.to_string()))?;
            let (f, chunk) =
                read.map_err(|e| BucketError::Failed(format!("cannot read the local entry: {e}")))?;
            file = Some(f);
            match tokio::time::timeout(self.timeout, writer.wait_for_capacity(2)).await {
                Err(_) => return Err(BucketError::Timeout),
                Ok(r) => r.map_err(|e| BucketError::Failed(e.to_string()))?,
            }
            writer.put(Bytes::from(chunk));
            left -= want as u64;
        }
        Ok(())
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

/// The metadata every object carries: its size, its label if printable, who vouched for it,
/// and its type.
fn attributes(size: u64, label: Option<&str>, sources: &[Source]) -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(
        Attribute::Metadata(META_SIZE.into()),
        AttributeValue::from(size.to_string()),
    );
    if let Some(label) = label.and_then(|l| clean_label(l.to_string())) {
        attributes.insert(
            Attribute::Metadata(META_LABEL.into()),
            AttributeValue::from(label),
        );
    }
    let mut kept = sources;
    let mut text = sources_to_text(kept);
    while text.len() > MAX_SOURCES_TEXT && !kept.is_empty() {
        kept = &kept[1..];
        text = sources_to_text(kept);
    }
    if !text.is_empty() {
        attributes.insert(
            Attribute::Metadata(META_SOURCES.into()),
            AttributeValue::from(text),
        );
    }
    attributes.insert(
        Attribute::ContentType,
        AttributeValue::from("application/octet-stream"),
    );
    attributes
}

/// A label fit for object metadata (printable ASCII, bounded), or `None`.
fn clean_label(label: String) -> Option<String> {
    let ok = !label.is_empty()
        && label.len() <= MAX_LABEL
        && label.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    ok.then_some(label)
}
