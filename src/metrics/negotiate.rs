//! Which exposition format a scraper gets: OpenMetrics when its `Accept` prefers
//! `application/openmetrics-text` (Prometheus itself sends it with q=0.5 over `text/plain`'s
//! 0.3), the Prometheus text format 0.0.4 otherwise, including no `Accept` at all (`curl`,
//! `promtool check metrics`), as Prometheus's own client libraries negotiate.

use crate::header_list::{field_elements, media_range};
use http::HeaderMap;
use http::header::ACCEPT;

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Text => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The format for a request with `headers`.
pub(crate) fn choose(headers: &HeaderMap) -> Format {
    let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
    for element in field_elements(headers.get_all(ACCEPT)) {
        let (range, q) = media_range(&element);
        match range.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    if openmetrics > 0.0 && openmetrics >= text {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> Format {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, v.parse().unwrap());
        choose(&h)
    }

    #[test]
    fn prometheus_gets_openmetrics_and_everyone_else_text() {
        // Prometheus 2.x and 3.x scrape with this header by default.
        assert_eq!(
            accept(
                "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
            ),
            Format::OpenMetrics
        );
        assert_eq!(accept("application/openmetrics-text"), Format::OpenMetrics);
        assert_eq!(choose(&HeaderMap::new()), Format::Text);
        assert_eq!(accept("*/*"), Format::Text);
        assert_eq!(accept("text/plain;version=0.0.4"), Format::Text);
        // Asked for, but less than text: text. Refused outright (q=0): text.
        assert_eq!(
            accept("text/plain, application/openmetrics-text;q=0.5"),
            Format::Text
        );
        assert_eq!(accept("application/openmetrics-text;q=0"), Format::Text);
    }
}
