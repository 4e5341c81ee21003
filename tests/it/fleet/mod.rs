//! The fleet as one cache, against a real SeaweedFS: several `fetchgate serve` processes, each
//! with its own disk, on one bucket, in front of loopback upstreams that count what they are
//! asked and can hold their answers (a slow upstream). Four members asked at once cost the
//! upstream one request per artifact and per metadata document; a fifth costs none within the
//! TTL; a holder killed mid-fetch, a lease forged or lapsed, metadata rewritten without the
//! fleet key and a dead bucket each cost at most one more fetch and never an unverified byte.

mod artifacts;
mod boundaries;
mod clients;
mod failures;
mod harness;
mod metadata;
mod oci;
