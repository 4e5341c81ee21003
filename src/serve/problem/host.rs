//! The `Host` check's refusals as problems (beside the rest in `problem.rs`, which would pass
//! 500 lines with them).

use http::StatusCode;
use serde_json::json;

use super::Problem;
use crate::access::host::HostRefused;

impl From<HostRefused> for Problem {
    fn from(e: HostRefused) -> Self {
        match &e {
            HostRefused::Malformed(_) => Problem::new(
                StatusCode::BAD_REQUEST,
                e.code(),
                e.origin(),
                e.detail(),
                "send one Host header: the name or address you reach fetchgate at",
            ),
            HostRefused::Foreign { accepted, .. } => {
                let mut p = Problem::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    e.code(),
                    e.origin(),
                    e.detail(),
                    "reach fetchgate by one of the accepted names, or ask the operator to list this name in [access] hosts",
                );
                p.extra = Some(json!({ "accepted": accepted }));
                p
            }
        }
        .field("Host")
    }
}
