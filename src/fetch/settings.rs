//! The fetcher's part of `[cache]`: how large one fetched artifact may be, how long one
//! locator's fetch may take, and how long a request waits on another source's fetch of the
//! same artifact. Read here, by the module that uses them, from the table as written.

use std::time::Duration;

use super::flight::DEFAULT_FLIGHT_HEDGE;
use crate::store::CacheSection;
use crate::toml_file::{FileError, TomlSource};

/// `[cache] fetch_timeout_ms` when unset: ten minutes, enough for a large artifact on a slow
/// link.
const FETCH_TIMEOUT_DEFAULT_MS: u64 = 600_000;

/// The fetcher's keys of `[cache]`, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// Largest entry fetched through (`?size=`), filled from the shared tier or published by
    /// the proxy's tee.
    pub max_object_bytes: u64,
    /// Time allowed for one mirror's whole fetch-through.
    pub fetch_timeout: Duration,
    /// Longest a request waits on a fetch of the same artifact from another source (other
    /// mirrors, another registry or URL) before it fetches from its own.
    pub flight_hedge: Duration,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            max_object_bytes: 1 << 30,
            fetch_timeout: Duration::from_millis(FETCH_TIMEOUT_DEFAULT_MS),
            flight_hedge: DEFAULT_FLIGHT_HEDGE,
        }
    }
}

impl CacheLimits {
    /// Checks `max_object_bytes`, `fetch_timeout_ms` and `flight_hedge_ms` of `[cache]`.
    pub(crate) fn from_section(
        section: &CacheSection,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let default = Self::default();
        Ok(Self {
            max_object_bytes: src.at_least(
                &section.max_object_bytes,
                default.max_object_bytes,
                1,
            )?,
            fetch_timeout: Duration::from_millis(src.at_least(
                &section.fetch_timeout_ms,
                FETCH_TIMEOUT_DEFAULT_MS,
                1,
            )?),
            flight_hedge: src.millis_up_to_a_minute(
                &section.flight_hedge_ms,
                default.flight_hedge.as_millis() as u64,
                0,
            )?,
        })
    }
}
