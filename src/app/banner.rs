//! What `fetchgate serve` says it will do once its listeners are bound: version and commit,
//! the config file, the cache (absolute directory, entries), the policy (the built-in
//! profile plus the operator's trust and deny rules and per-client policies), and one line per
//! registry with the URL its clients use and the line that sets them up. Every upstream the
//! policy refuses, or whose shape is known to fail, follows as a warning with its fix.

use super::App;
use super::upstreams::UpstreamCheck;

/// One line of the banner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BannerLine {
    /// True for what needs the operator (a refused upstream, a wrong shape).
    pub warn: bool,
    /// The words (a trust rule spans lines of its own).
    pub text: String,
}

impl BannerLine {
    fn info(text: String) -> Self {
        Self { warn: false, text }
    }

    fn warn(text: String) -> Self {
        Self { warn: true, text }
    }
}

/// `n` bytes for people.
fn bytes(n: u64) -> String {
    format!("{} ({n} bytes)", indicatif::BinaryBytes(n))
}

impl App {
    /// The banner for the config in force, its bound listeners and `checks` (its upstreams as
    /// judged at start).
    pub fn banner(&self, checks: &[UpstreamCheck]) -> Vec<BannerLine> {
        let config = self.config();
        let mut out = Vec::new();
        out.push(BannerLine::info(format!(
            "fetchgate {}: config {}",
            crate::VERSION,
            match self.file() {
                Some(f) => f.display().to_string(),
                None => "none: the embedded defaults (no --config, no FETCHGATE_CONFIG)".into(),
            }
        )));
        let stats = self.lasting().store.stats();
        out.push(BannerLine::info(format!(
            "cache {}: {} entries, {} of {}",
            self.lasting().store.root().display(),
            stats.entries,
            bytes(stats.bytes),
            bytes(stats.max_bytes),
        )));
        let rules = config.policy.operator_rules();
        let count = |k: &str| rules[k].as_array().map_or(0, Vec::len);
        let policies = config.access.policies.summary();
        let names: Vec<&str> = policies.iter().filter_map(|p| p["name"].as_str()).collect();
        out.push(BannerLine::info(format!(
            "policy: the built-in public-client profile plus {} [[egress.trust]] and {} [[egress.deny]] rules; ports {:?}, CONNECT ports {:?}; {} per-client policies{}",
            count("trust"),
            count("deny"),
            config.policy.ports_for(crate::decide::RequestKind::Http),
            config.policy.ports_for(crate::decide::RequestKind::Connect),
            policies.len(),
            if names.is_empty() {
                String::new()
            } else {
                format!(" ({})", names.join(", "))
            },
        )));
        let listeners = self.listeners();
        if let Some(proxy) = listeners.proxy {
            let scheme = if config.listen_tls.proxy.is_some() {
                "https"
            } else {
                "http"
            };
            let at = crate::registry::kind::reachable(proxy);
            out.push(BannerLine::info(format!(
                "proxy clients: HTTP_PROXY={scheme}://{at} HTTPS_PROXY={scheme}://{at} (requests for fetchgate's own addresses are served, not refused)"
            )));
        }
        let reach = self.reach();
        if reach.is_empty() {
            out.push(BannerLine::info(
                "no [[registry]]: forward and CONNECT requests are never answered from the cache; /sha256/ and registries are".into(),
            ));
        }
        for r in &reach {
            let listen = r
                .listen
                .as_ref()
                .map_or(String::new(), |l| format!(", and at its own listener {l}"));
            out.push(BannerLine::info(format!(
                "registry {} ({}) from {}: clients use {}{listen}; set up with: {}",
                r.name, r.kind, r.upstream, r.mount, r.client
            )));
        }
        for c in checks {
            if let (super::upstreams::Judged::NotResolved, Some(code)) = (c.verdict, c.code) {
                out.push(BannerLine::warn(format!(
                    "upstream not resolved at start: {} {} ({code}); it is judged again at each request",
                    c.field, c.url
                )));
            }
            if let Some(refused) = &c.refused {
                let mut text = format!(
                    "upstream refused by the egress policy: {} {}: {refused}",
                    c.field, c.url
                );
                if !c.enforced {
                    text.push_str(" (not enforced: the bucket is reached directly)");
                }
                match &c.trust_rule {
                    Some(rule) => text.push_str(&format!(
                        "; if you operate it, add this rule and reload (SIGHUP):\n{}",
                        rule.trim_end()
                    )),
                    None => {
                        if let Some(next) = &c.next {
                            text.push_str(&format!("; {next}"));
                        }
                    }
                }
                out.push(BannerLine::warn(text));
            }
            if let Some(shape) = c.shape {
                out.push(BannerLine::warn(format!(
                    "upstream shape: {} {}: {shape}",
                    c.field, c.url
                )));
            }
        }
        out
    }
}
