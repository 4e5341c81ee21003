//! LOVE failures: a stable code, the failed field (a JSON pointer) or locator, what happened,
//! and a safe next action. None ever suggests disabling verification. The codes and their
//! sides are [`crate::failure::FailureCode`]'s, shared with the format profiles.

use crate::failure::Failure;

/// A failure in discovery, validation, retrieval or inspection of a LOVE package.
pub(crate) type LoveError = Failure;

pub(crate) use crate::pack::love::document::NEXT_MANIFEST;
