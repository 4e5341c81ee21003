//! The operator's TOML configuration file.

use std::net::IpAddr;

use super::reach::{Config, RequestKind};
use super::text;

/// Cloud metadata addresses no operator rule can open (the design's third wall).
const METADATA: [&str; 3] = ["169.254.169.254", "168.63.129.16", "fd00:ec2::254"];

/// A configuration file. Properties: whatever trust rules a file that loads writes, the
/// policy it builds still refuses every cloud metadata address on every port a rule names;
/// and the same text loads again (reading is deterministic).
pub fn config(data: &[u8]) {
    let Some(toml) = text(data) else { return };
    // Relative paths resolve under a folder that does not exist, so nothing is read.
    let base = std::path::Path::new("/nonexistent/fetchgate-fuzz");
    let Ok(c) = Config::from_toml_in("fuzz.toml", toml, base) else {
        return;
    };
    for ip in METADATA {
        let Ok(ip) = ip.parse::<IpAddr>() else {
            continue;
        };
        for port in [80, 443, 8080, 1, 65535] {
            for kind in [RequestKind::Http, RequestKind::Https, RequestKind::Connect] {
                let v = c.policy.judge_address(ip, port, kind, None);
                assert!(!v.allowed(), "{ip}:{port} allowed by {toml:?}");
            }
        }
    }
    assert!(
        Config::from_toml_in("fuzz.toml", toml, base).is_ok(),
        "loaded once, then refused"
    );
}
