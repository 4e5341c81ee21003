//! The table of format profiles: every format fetchgate verifies before publication, one
//! row each, which the CLI and the `/pack/v1/fetch` route dispatch through.

use super::error::PackError;
use super::profile::Profile;
use crate::failure::FailureCode;

/// Every format fetchgate verifies before publication.
pub(crate) const PROFILES: &[Profile] = &[
    super::love::PROFILE,
    super::agent_package::PROFILE,
    super::openwop::PROFILE,
    super::lgflow::PROFILE,
];

/// The profile called `name`.
pub(crate) fn find(name: &str) -> Result<&'static Profile, PackError> {
    PROFILES.iter().find(|p| p.name == name).ok_or_else(|| {
        let known: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        PackError::new(
            FailureCode::PackFormatUnknown,
            format!("no format {name:?}; known: {}", known.join(", ")),
            "name one of the known formats",
        )
        .field("format")
    })
}
