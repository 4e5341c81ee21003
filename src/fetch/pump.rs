//! The one body pump every fetch reads an upstream body through: it takes the next data
//! chunk, hashes it when a digest is being checked, hands it to a tapped client when one is
//! attached (dropping a client that falls behind, never the fetch), counts what moved, and
//! turns a body that broke off or went quiet into the failure code every fetch reports. The
//! caller only says where each chunk goes next (a fill, memory).

use bytes::Bytes;
use http_body_util::BodyExt;

use super::failure::{FetchCode, body_failure};
use super::idle::IdleBody;
use super::integrity::{Algorithm, Hasher};
use crate::body::tap::Tap;

/// An upstream body being read chunk by chunk.
pub(crate) struct Pump {
    body: IdleBody,
    hasher: Option<Hasher>,
    tap: Option<Tap>,
    moved: u64,
}

impl Pump {
    /// Reads `body`.
    pub(crate) fn new(body: IdleBody) -> Self {
        Self {
            body,
            hasher: None,
            tap: None,
            moved: 0,
        }
    }

    /// Also hashes every chunk with `algorithm` ([`Pump::finish`]).
    pub(crate) fn hashing(mut self, algorithm: Algorithm) -> Self {
        self.hasher = Some(Hasher::new(algorithm));
        self
    }

    /// Also hands every chunk to `tap`'s client, for as long as it keeps up.
    pub(crate) fn tapped(mut self, tap: Option<Tap>) -> Self {
        self.tap = tap;
        self
    }

    /// The next data chunk (`None` at the end of the body), already hashed and tapped.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, (FetchCode, String)> {
        while let Some(frame) = self.body.frame().await {
            let frame = frame.map_err(|e| body_failure(e.as_ref()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.moved += data.len() as u64;
            if let Some(h) = &mut self.hasher {
                h.update(&data);
            }
            if let Some(t) = &self.tap
                && !t.data(data.clone()).await
            {
                self.tap = None;
            }
            return Ok(Some(data));
        }
        Ok(None)
    }

    /// The bytes read so far.
    pub(crate) fn moved(&self) -> u64 {
        self.moved
    }

    /// The digest of every byte read, with the algorithm [`Pump::hashing`] chose (`None`
    /// without one), and the tap, if its client kept up to the end.
    pub(crate) fn finish(self) -> (Option<Vec<u8>>, Option<Tap>) {
        (self.hasher.map(Hasher::finish), self.tap)
    }
}

/// Reads a body into memory, failing as soon as it passes `max` bytes.
pub(crate) async fn read_capped(body: IdleBody, max: u64) -> Result<Bytes, (FetchCode, String)> {
    let mut pump = Pump::new(body);
    let mut buf = bytes::BytesMut::new();
    while let Some(data) = pump.next().await? {
        if pump.moved() > max {
            return Err((
                FetchCode::SizeMismatch,
                format!("the body is longer than {max} bytes; reading stopped there"),
            ));
        }
        buf.extend_from_slice(&data);
    }
    Ok(buf.freeze())
}
