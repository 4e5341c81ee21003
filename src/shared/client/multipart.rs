//! Large objects into the bucket: a multipart upload from the local file, a part at a time,
//! whole or absent, with one writer per key from this instance.

use std::io::Read;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{PutMultipartOptions, WriteMultipart};

use super::object_meta::attributes;
use super::{Bucket, BucketError, Put};
use crate::store::Source;

/// Objects larger than this are uploaded in parts from their file instead of from memory.
pub(crate) const SINGLE_PUT_MAX: u64 = 64 << 20;
/// The size of one part of a multipart upload.
const PART: usize = 8 << 20;

impl Bucket {
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
}
