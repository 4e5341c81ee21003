//! Rule 3 of the Agent Package (12.6): the three authored declarations (the manifest, the draft
//! Descriptor and the install file) carry no address, and a depot refuses to publish one that
//! does. The exceptions are by member and by file: the manifest's own `$schema`, `homepage`,
//! `repository` and the `repository` of each `from` entry under `net.agentdoc.package`; the
//! Descriptor's `schema` of each `can_use` entry; nothing in the install file, and nothing in
//! `mcp.json`, which names servers by system name and carries no vendor address. An address is
//! read conservatively: a URL (`scheme://`), an IPv4 literal or an IPv6 literal (bracketed or
//! not, with a zone or not), in a value or a member name.

use serde_json::Value;

/// Which of the three declarations a document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Declaration {
    /// `plugin.json`.
    Manifest,
    /// `descriptor.json`.
    Descriptor,
    /// `install.json`.
    Install,
    /// `mcp.json`: servers by system name, with no vendor address (12.2, 12.4 section 3).
    Servers,
}

/// An address found: the JSON pointer where, and what kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// JSON pointer to the member.
    pub(crate) pointer: String,
    /// `a URL` or `an IP address`.
    pub(crate) what: &'static str,
}

/// Whether the member at `path` (member names and indices) is one rule 3 excepts.
fn excepted(kind: Declaration, path: &[String]) -> bool {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match kind {
        Declaration::Manifest => matches!(
            p.as_slice(),
            ["$schema" | "homepage" | "repository", ..]
                | [
                    "extensions",
                    "net.agentdoc.package",
                    "from",
                    _,
                    "repository",
                    ..
                ]
        ),
        Declaration::Descriptor => p
            .windows(3)
            .any(|w| w[0] == "can_use" && w[1].parse::<usize>().is_ok() && w[2] == "schema"),
        Declaration::Install | Declaration::Servers => false,
    }
}

/// What kind of address `s` holds, if any.
fn address_in(s: &str) -> Option<&'static str> {
    let url = s.match_indices("://").any(|(i, _)| {
        let scheme = s[..i]
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .next()
            .unwrap_or("");
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
    });
    if url {
        return Some("a URL");
    }
    let ip = s
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .any(|tok| {
            let parts: Vec<&str> = tok.split('.').collect();
            parts.len() == 4
                && parts
                    .iter()
                    .all(|p| (1..=3).contains(&p.len()) && p.parse::<u8>().is_ok())
        });
    (ip || has_ipv6(s)).then_some("an IP address")
}

/// Whether `s` holds an IPv6 literal: a run of letters, digits, `:`, `.` and `%` (so that a
/// word such as `std::vector` stays whole) with two colons or more, which, without brackets
/// around it, a port after them or a zone after `%`, parses as an IPv6 address
/// (`2001:db8::7`, `[fe80::1%eth0]:8443`, `::ffff:10.0.0.7`, `::1`).
fn has_ipv6(s: &str) -> bool {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || ":.%".contains(c)))
        .filter(|run| run.matches(':').count() >= 2)
        .any(|run| {
            let addr = run.split('%').next().unwrap_or(run);
            addr.parse::<std::net::Ipv6Addr>().is_ok()
        })
}

/// The first address in `doc` outside the members `kind` excepts.
pub(crate) fn find(kind: Declaration, doc: &Value) -> Option<Found> {
    walk(kind, doc, &mut Vec::new())
}

/// Depth-first search under `path`.
fn walk(kind: Declaration, v: &Value, path: &mut Vec<String>) -> Option<Found> {
    if excepted(kind, path) {
        return None;
    }
    let pointer = |path: &[String]| {
        path.iter()
            .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
            .collect::<String>()
    };
    match v {
        Value::String(s) => address_in(s).map(|what| Found {
            pointer: pointer(path),
            what,
        }),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| {
            path.push(i.to_string());
            let f = walk(kind, x, path);
            path.pop();
            f
        }),
        Value::Object(o) => o.iter().find_map(|(k, x)| {
            path.push(k.clone());
            let f = if excepted(kind, path) {
                None
            } else {
                address_in(k)
                    .map(|what| Found {
                        pointer: pointer(path),
                        what,
                    })
                    .or_else(|| walk(kind, x, path))
            };
            path.pop();
            f
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addresses_are_found_outside_the_excepted_members() {
        let m = json!({
            "$schema": "https://agentplugins.dev/schema/v1.json",
            "homepage": "https://example.org/agent",
            "repository": { "type": "git", "url": "https://example.org/agent.git" },
            "extensions": { "net.agentdoc.package": {
                "from": [{ "name": "base", "repository": "https://example.org/base" }]
            } },
            "version": "1.2.3"
        });
        assert_eq!(find(Declaration::Manifest, &m), None);
        let mut bad = m.clone();
        bad["extensions"]["net.agentdoc.package"]["from"][0]["endpoint"] =
            json!("https://api.example.org");
        assert_eq!(
            find(Declaration::Manifest, &bad).map(|f| f.pointer),
            Some("/extensions/net.agentdoc.package/from/0/endpoint".into())
        );
        let d =
            json!({ "offerings": [{ "can_use": [{ "schema": "https://schema.org/Invoice" }] }] });
        assert_eq!(find(Declaration::Descriptor, &d), None);
        let d = json!({ "systems": [{ "name": "crm", "base": "call 10.0.0.7 first" }] });
        assert_eq!(
            find(Declaration::Descriptor, &d),
            Some(Found {
                pointer: "/systems/0/base".into(),
                what: "an IP address"
            })
        );
        let i = json!({ "homepage": "https://example.org" });
        assert!(
            find(Declaration::Install, &i).is_some(),
            "no exception in the install file"
        );
        assert_eq!(
            find(Declaration::Install, &json!({ "v": "1.2.3", "n": "a:b" })),
            None
        );
        for v6 in [
            "2001:db8::7",
            "[fe80::1%eth0]:8443",
            "::ffff:10.0.0.7",
            "::1",
            "at fd00::1,",
        ] {
            assert!(
                find(
                    Declaration::Install,
                    &json!({ "systems": [{ "host": v6 }] })
                )
                .is_some(),
                "{v6}"
            );
        }
        for not in ["crm::sales", "12:30:45", "std::vector", "a::b::c", "ns:a:b"] {
            assert_eq!(
                find(Declaration::Install, &json!({ "n": not })),
                None,
                "{not}"
            );
        }
    }
}
