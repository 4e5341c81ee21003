//! The routers' one spelling of a request path (`serve/route_path.rs`).

use super::reach::route_path;
use super::text;

/// One request path. Properties: the routing spelling is a fixed point (spelling it again
/// changes nothing), it never decodes an escape into `/` or `\` (only the ambiguity check's
/// reading does), it changes nothing without a `%`, and both readings keep every byte that
/// is not part of an escape.
pub fn route_path(data: &[u8]) {
    let Some(path) = text(data) else { return };
    let once = route_path::normalise(path);
    assert_eq!(route_path::normalise(&once), once, "{path:?}");
    if !path.contains('%') {
        assert_eq!(once, path);
    }
    let slashes = |s: &str| s.bytes().filter(|b| matches!(b, b'/' | b'\\')).count();
    assert_eq!(slashes(&once), slashes(path), "{path:?}");
    let decoded = route_path::with_separators_decoded(path);
    assert_eq!(
        route_path::with_separators_decoded(&decoded),
        decoded,
        "{path:?}"
    );
    assert!(slashes(&decoded) >= slashes(path));
}
