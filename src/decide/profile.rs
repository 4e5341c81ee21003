//! The built-in egress profile (`policy/public-client.toml`): read, checked and compiled.
//!
//! The file is embedded in the binary. [`Profile::builtin`] parses it at start-up and refuses
//! to go on if it is malformed, naming the file, the line and the field.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::classify::{Classifier, Form, TableEntry, Transition, UnknownForm};
use super::names::{NameRule, NameRules, normalise_name};
use super::reason::Reason;
use super::rule::{Rule, RuleId, RuleKind};
use crate::toml_file::{FileError, TomlSource};

/// The embedded profile text.
pub const BUILTIN_TEXT: &str = include_str!("../../policy/public-client.toml");
/// The name the embedded profile is reported under.
pub(crate) const BUILTIN_NAME: &str = "<embedded>/policy/public-client.toml";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    refuse: Vec<RawRefuse>,
    allow: Vec<RawBlock>,
    metadata: Vec<RawBlock>,
    transition: Vec<RawTransition>,
    name: Vec<RawName>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRefuse {
    cidr: Spanned<String>,
    name: String,
    reference: String,
    reason: Spanned<Reason>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBlock {
    cidr: Spanned<String>,
    name: String,
    reference: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransition {
    form: Spanned<String>,
    cidr: Spanned<String>,
    name: String,
    reference: String,
    reason: Option<Spanned<Reason>>,
    allowed_when_global: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawName {
    name: Spanned<String>,
    suffix: bool,
    reason: Spanned<Reason>,
    reference: String,
}

/// The compiled profile: its rules, the address classifier and the refused names.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Every profile rule, indexed by [`RuleId`].
    pub(crate) rules: Vec<Rule>,
    /// Decides addresses.
    pub(crate) classifier: Classifier,
    /// Decides names before resolution.
    pub(crate) names: NameRules,
    /// The metadata blocks, which no trust rule may overlap.
    pub(crate) metadata: Vec<(IpNet, RuleId)>,
}

impl Profile {
    /// Parses and checks the embedded profile.
    pub fn builtin() -> Result<Self, FileError> {
        Self::from_toml(BUILTIN_NAME, BUILTIN_TEXT)
    }

    /// Parses and checks a profile from `text`, reporting errors against `file`.
    pub(crate) fn from_toml(file: &str, text: &str) -> Result<Self, FileError> {
        let src = TomlSource::new(file, text);
        let raw: RawProfile = src.parse()?;
        let mut b = Builder {
            src: &src,
            rules: Vec::new(),
            blocks: Vec::new(),
        };

        for r in &raw.refuse {
            let net = b.net(&r.cidr)?;
            let reason = *r.reason.get_ref();
            if !reason.is_address_class() {
                return Err(src.error_at(
                    r.reason.span(),
                    format!("`{reason}` is not an address reason code for a [[refuse]] block"),
                ));
            }
            let id = b.rule(RuleKind::Refuse, &r.name, &r.reference, net.to_string());
            b.block(&r.cidr, net, TableEntry { reason, rule: id })?;
        }
        let mut metadata = Vec::new();
        for m in &raw.metadata {
            let net = b.net(&m.cidr)?;
            let id = b.rule(RuleKind::Metadata, &m.name, &m.reference, net.to_string());
            let entry = TableEntry {
                reason: Reason::MetadataAddress,
                rule: id,
            };
            b.block(&m.cidr, net, entry)?;
            metadata.push((net, id));
        }
        // Carve-outs go last so that they can be checked against every refusing block.
        for a in &raw.allow {
            let net = b.net(&a.cidr)?;
            let inside_refused = b
                .blocks
                .iter()
                .any(|(n, e)| !e.reason.allows() && n.contains(&net) && *n != net);
            if !inside_refused {
                return Err(src.error_at(
                    a.cidr.span(),
                    format!(
                        "[[allow]] {net} is not inside any refused block, so it carves nothing"
                    ),
                ));
            }
            let id = b.rule(RuleKind::Allow, &a.name, &a.reference, net.to_string());
            let entry = TableEntry {
                reason: Reason::GlobalAddress,
                rule: id,
            };
            b.block(&a.cidr, net, entry)?;
        }

        let mut transitions = Vec::new();
        for t in &raw.transition {
            let form: Form = t
                .form
                .get_ref()
                .parse()
                .map_err(|unknown: UnknownForm| src.error_at(t.form.span(), unknown))?;
            let net = b.net(&t.cidr)?;
            if net != IpNet::V6(form.prefix()) {
                return Err(src.error_at(
                    t.cidr.span(),
                    format!("the {} form is {}, not {net}", form.code(), form.prefix()),
                ));
            }
            if transitions.iter().any(|x: &Transition| x.form == form) {
                return Err(src.error_at(t.form.span(), "transition form listed twice"));
            }
            let reason = match (&t.reason, t.allowed_when_global) {
                (Some(r), _) if !r.get_ref().is_address_class() => {
                    return Err(src.error_at(r.span(), "not an address reason code"));
                }
                (Some(r), _) => *r.get_ref(),
                (None, true) => Reason::GlobalAddress,
                (None, false) => {
                    return Err(src.error_at(
                        t.form.span(),
                        "a form refused even when its IPv4 address is global needs a `reason`",
                    ));
                }
            };
            let id = b.rule(RuleKind::Transition, &t.name, &t.reference, net.to_string());
            transitions.push(Transition {
                form,
                net: form.prefix(),
                reason,
                rule: id,
            });
        }
        for form in Form::ALL {
            if !transitions.iter().any(|t| t.form == form) {
                return Err(src.error("transition", format!("the {} form is missing", form.code())));
            }
        }

        let mut names = Vec::new();
        for n in &raw.name {
            let reason = *n.reason.get_ref();
            if !reason.is_name_class() {
                return Err(src.error_at(n.reason.span(), "not a name reason code"));
            }
            let name = normalise_name(n.name.get_ref()).map_err(|why| {
                src.error_at(n.name.span(), format!("not a valid DNS name: {why}"))
            })?;
            if names.iter().any(|x: &NameRule| x.name == name) {
                return Err(src.error_at(n.name.span(), "name listed twice"));
            }
            let scope = if n.suffix {
                format!("{name} and every name under it")
            } else {
                name.clone()
            };
            let title = match reason {
                Reason::LocalhostName => "Localhost names",
                Reason::MetadataName => "Cloud metadata name",
                _ => "Special-use namespace",
            };
            let id = b.rule(RuleKind::Name, title, &n.reference, scope);
            names.push(NameRule {
                name,
                suffix: n.suffix,
                reason,
                rule: id,
            });
        }

        let classifier = Classifier::new(&b.blocks, transitions);
        Ok(Self {
            rules: b.rules,
            classifier,
            names: NameRules::new(names),
            metadata,
        })
    }
}

struct Builder<'s> {
    src: &'s TomlSource<'s>,
    rules: Vec<Rule>,
    blocks: Vec<(IpNet, TableEntry)>,
}

impl Builder<'_> {
    fn net(&self, cidr: &Spanned<String>) -> Result<IpNet, FileError> {
        parse_cidr(cidr.get_ref()).map_err(|why| self.src.error_at(cidr.span(), why))
    }

    fn rule(&mut self, kind: RuleKind, name: &str, reference: &str, scope: String) -> RuleId {
        let id = RuleId(u32::try_from(self.rules.len()).unwrap_or(u32::MAX));
        self.rules.push(Rule {
            kind,
            name: name.to_string(),
            reference: reference.to_string(),
            scope,
        });
        id
    }

    fn block(
        &mut self,
        cidr: &Spanned<String>,
        net: IpNet,
        entry: TableEntry,
    ) -> Result<(), FileError> {
        if self.blocks.iter().any(|(n, _)| *n == net) {
            return Err(self
                .src
                .error_at(cidr.span(), format!("{net} is listed twice")));
        }
        self.blocks.push((net, entry));
        Ok(())
    }
}

/// Why text is not a CIDR block as fetchgate reads one (the text as written in each).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CidrError {
    /// Neither a CIDR nor an address.
    #[error("`{0}` is not a CIDR such as 192.0.2.0/24 or 2001:db8::/32")]
    NotCidr(String),
    /// A CIDR written with host bits set.
    #[error("`{text}` has host bits set; write the network as {network}")]
    HostBits {
        /// The text.
        text: String,
        /// The network it names.
        network: IpNet,
    },
}

/// Parses a CIDR that must be written as its network address (`10.0.0.0/8`, not `10.1.2.3/8`);
/// a bare address means a single-address block.
pub(crate) fn parse_cidr(text: &str) -> Result<IpNet, CidrError> {
    let net: IpNet = match text.parse() {
        Ok(n) => n,
        Err(_) => match text.parse::<IpAddr>() {
            Ok(ip) => IpNet::from(ip),
            Err(_) => return Err(CidrError::NotCidr(text.to_string())),
        },
    };
    if net.network() != net.addr() {
        return Err(CidrError::HostBits {
            text: text.to_string(),
            network: net.trunc(),
        });
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profile_loads() {
        let p = Profile::builtin().expect("the embedded profile is valid");
        assert!(p.rules.len() > 60, "{} rules", p.rules.len());
        assert!(!p.metadata.is_empty());
    }

    fn broken(replace: &str, with: &str) -> FileError {
        assert!(
            BUILTIN_TEXT.contains(replace),
            "fixture text not found: {replace}"
        );
        let text = BUILTIN_TEXT.replacen(replace, with, 1);
        Profile::from_toml("p.toml", &text).expect_err("must be refused")
    }

    fn line_of(text: &str) -> usize {
        let at = BUILTIN_TEXT.find(text).unwrap();
        BUILTIN_TEXT[..at].matches('\n').count() + 1
    }

    #[test]
    fn malformed_cidr_names_file_line_and_field() {
        let err = broken("cidr = \"10.0.0.0/8\"", "cidr = \"10.0.0.0/33\"");
        assert_eq!(err.file, "p.toml");
        assert_eq!(err.line, Some(line_of("cidr = \"10.0.0.0/8\"")));
        assert_eq!(err.field.as_deref(), Some("refuse[2].cidr"), "{err}");
    }

    #[test]
    fn host_bits_are_refused_with_the_network_to_write() {
        let err = broken("cidr = \"10.0.0.0/8\"", "cidr = \"10.1.0.0/8\"");
        assert!(err.message.contains("10.0.0.0/8"), "{err}");
    }

    #[test]
    fn unknown_reason_code_is_refused() {
        let err = broken(
            "reason = \"private_address\"",
            "reason = \"privat_address\"",
        );
        assert_eq!(err.field.as_deref(), Some("refuse[2].reason"), "{err}");
    }

    #[test]
    fn non_address_reason_is_refused_for_a_block() {
        let err = broken("reason = \"private_address\"", "reason = \"trusted\"");
        assert!(err.message.contains("not an address reason"), "{err}");
    }

    #[test]
    fn duplicate_block_is_refused() {
        let err = broken("cidr = \"172.16.0.0/12\"", "cidr = \"10.0.0.0/8\"");
        assert!(err.message.contains("listed twice"), "{err}");
    }

    #[test]
    fn allow_outside_any_refused_block_is_refused() {
        let err = broken("cidr = \"192.0.0.9/32\"", "cidr = \"8.8.8.8/32\"");
        assert!(err.message.contains("carves nothing"), "{err}");
    }

    #[test]
    fn unknown_table_field_is_refused() {
        let err = broken("suffix = false", "sufix = false");
        assert!(
            err.field.as_deref().unwrap_or("").ends_with("sufix"),
            "{err}"
        );
    }

    #[test]
    fn wrong_transition_prefix_is_refused() {
        let err = broken("cidr = \"2002::/16\"", "cidr = \"2003::/16\"");
        assert!(err.message.contains("2002::/16"), "{err}");
    }

    #[test]
    fn bad_name_is_refused() {
        let err = broken("name = \"onion\"", "name = \"on ion\"");
        assert!(
            err.field.as_deref().unwrap_or("").starts_with("name["),
            "{err}"
        );
    }
}
