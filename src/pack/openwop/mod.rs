//! The `openwop` profile (placeholder until the registry module lands).

use super::error::PackError;
use super::profile::{Candidate, Judged, Located, Params, Profile};
use super::{PackSettings, Packs};

/// The `openwop` row of the profile table.
pub(crate) const PROFILE: Profile = Profile {
    name: "openwop",
    label_prefix: Some("openwop"),
    params: &["registry", "name", "version", "range"],
    locate,
    inspect,
};

fn locate<'a>(_packs: &'a Packs, _params: &'a Params) -> Located<'a> {
    Box::pin(async move {
        Err(PackError::request(
            "format",
            "openwop is not implemented yet",
        ))
    })
}

fn inspect(_cand: &Candidate, _settings: &PackSettings) -> Result<Judged, PackError> {
    Err(PackError::request(
        "format",
        "openwop is not implemented yet",
    ))
}
