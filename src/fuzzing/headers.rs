//! RFC 9110 list-valued header fields (`Cache-Control`, `If-None-Match`, `Accept`).

use super::reach::header_list;
use super::text;

/// One field value. Properties: elements are non-empty and trimmed; joining them with `, `
/// and reading again gives the same elements (a comma inside a quoted string never splits);
/// a directive's name is lower case; a media range's weight is within 0..=1.
pub fn header_list(data: &[u8]) {
    let Some(value) = text(data) else { return };
    let elements = header_list::elements(value);
    for e in &elements {
        assert!(!e.is_empty());
        assert_eq!(e.trim_matches([' ', '\t']), *e);
        let (name, _) = header_list::directive(e);
        assert_eq!(name, name.to_ascii_lowercase());
        let (_, q) = header_list::media_range(e);
        assert!((0.0..=1.0).contains(&q), "{q}");
    }
    let joined = elements.join(", ");
    assert_eq!(header_list::elements(&joined), elements, "{joined:?}");
    if let Ok(v) = http::HeaderValue::from_str(value) {
        let lines = [v.clone(), v];
        let twice = header_list::field_elements(&lines);
        assert_eq!(twice.len(), 2 * elements.len());
    }
    let _ = header_list::unquote(value);
}
