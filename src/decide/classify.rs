//! The address classifier: a pure function from an IP address to a [`Verdict`].
//!
//! IPv4 and IPv6 addresses are looked up in the profile's blocks (most specific wins). IPv6
//! forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by
//! the embedded address first: if it is refused, so is the IPv6 address, with the embedded
//! address's reason and the form recorded in [`Verdict::via`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv6Net};

use super::reason::Reason;
use super::rule::RuleId;
use super::table::{PrefixTable, number};
use super::verdict::Verdict;

/// What a block in the prefix table decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableEntry {
    /// [`Reason::GlobalAddress`] for carve-outs, the refusal reason otherwise.
    pub(crate) reason: Reason,
    /// The block's rule.
    pub(crate) rule: RuleId,
}

/// An IPv6 form that carries an IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2).
    Ipv4Mapped,
    /// `::a.b.c.d` (RFC 4291 §2.5.5.1, deprecated).
    Ipv4Compatible,
    /// `64:ff9b::a.b.c.d` (RFC 6052 well-known prefix).
    Nat64,
    /// `2002:AABB:CCDD::/48` (RFC 3056).
    SixToFour,
    /// `2001:0:SSSS:SSSS:flags:port:CCCC:CCCC`, client address obfuscated (RFC 4380 §4).
    Teredo,
}

impl Form {
    /// Every form; the profile must describe each one.
    pub(crate) const ALL: [Form; 5] = [
        Form::Ipv4Mapped,
        Form::Ipv4Compatible,
        Form::Nat64,
        Form::SixToFour,
        Form::Teredo,
    ];

    /// The form's name in the profile file.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Form::Ipv4Mapped => "ipv4_mapped",
            Form::Ipv4Compatible => "ipv4_compatible",
            Form::Nat64 => "nat64",
            Form::SixToFour => "6to4",
            Form::Teredo => "teredo",
        }
    }

    /// The prefix the form lives in; extraction below depends on exactly this prefix.
    pub(crate) fn prefix(self) -> Ipv6Net {
        let (addr, len) = match self {
            Form::Ipv4Mapped => (Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96),
            Form::Ipv4Compatible => (Ipv6Addr::UNSPECIFIED, 96),
            Form::Nat64 => (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96),
            Form::SixToFour => (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),
            Form::Teredo => (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32),
        };
        Ipv6Net::new_assert(addr, len)
    }

    /// The IPv4 addresses carried by `ip` (which must be inside [`Form::prefix`]).
    /// Teredo carries two: the server, and the client (stored bit-inverted).
    pub(crate) fn embedded(self, ip: Ipv6Addr) -> [Option<Ipv4Addr>; 2] {
        let bits = u128::from(ip);
        let low32 = Ipv4Addr::from(bits as u32);
        match self {
            Form::Ipv4Mapped | Form::Ipv4Compatible | Form::Nat64 => [Some(low32), None],
            Form::SixToFour => [Some(Ipv4Addr::from((bits >> 80) as u32)), None],
            Form::Teredo => [
                Some(Ipv4Addr::from((bits >> 64) as u32)),
                Some(Ipv4Addr::from(!(bits as u32))),
            ],
        }
    }
}

/// A transition form the profile names that fetchgate does not know; its message lists the
/// forms it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown transition form; known forms: {}",
    Form::ALL.map(|f| f.code()).join(", ")
)]
pub(crate) struct UnknownForm;

impl FromStr for Form {
    type Err = UnknownForm;
    fn from_str(s: &str) -> Result<Self, UnknownForm> {
        Form::ALL
            .into_iter()
            .find(|f| f.code() == s)
            .ok_or(UnknownForm)
    }
}

/// A transition form as the profile describes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transition {
    /// Which form.
    pub(crate) form: Form,
    /// Its prefix.
    pub(crate) net: Ipv6Net,
    /// The refusal reason when it does not ([`Reason::GlobalAddress`] when it does).
    pub(crate) reason: Reason,
    /// The form's rule.
    pub(crate) rule: RuleId,
}

/// Classifies addresses against the profile's blocks. Pure: no I/O, no allocation per call.
#[derive(Clone, Debug)]
pub(crate) struct Classifier {
    v4: PrefixTable<TableEntry>,
    v6: PrefixTable<TableEntry>,
    transitions: Vec<Transition>,
}

impl Classifier {
    /// Builds the tables from the profile's blocks and transition forms.
    pub(crate) fn new(blocks: &[(IpNet, TableEntry)], transitions: Vec<Transition>) -> Self {
        let (v4, v6): (Vec<_>, Vec<_>) = blocks
            .iter()
            .copied()
            .partition(|(net, _)| matches!(net, IpNet::V4(_)));
        Self {
            v4: PrefixTable::build(&v4),
            v6: PrefixTable::build(&v6),
            transitions,
        }
    }

    /// The verdict of the built-in profile on `ip`, before any operator rule.
    pub(crate) fn classify(&self, ip: IpAddr) -> Verdict {
        match ip {
            IpAddr::V4(v4) => self.classify_v4(v4),
            IpAddr::V6(v6) => self.classify_v6(v6),
        }
    }

    fn classify_v4(&self, ip: Ipv4Addr) -> Verdict {
        entry_verdict(self.v4.lookup(number(IpAddr::V4(ip))))
    }

    fn classify_v6(&self, ip: Ipv6Addr) -> Verdict {
        let direct = self.v6.lookup(u128::from(ip));
        let Some(t) = self.transitions.iter().find(|t| t.net.contains(&ip)) else {
            return entry_verdict(direct);
        };
        // A block more specific than the form (`::1/128` inside `::/96`) decides by itself.
        if let Some((len, _)) = direct
            && len > t.net.prefix_len()
        {
            return entry_verdict(direct);
        }
        for inner in t.form.embedded(ip).into_iter().flatten() {
            let v = self.classify_v4(inner);
            if !v.allowed() {
                return Verdict {
                    via: Some(t.rule),
                    ..v
                };
            }
        }
        Verdict::by(t.reason, t.rule)
    }
}

fn entry_verdict(found: Option<(u8, TableEntry)>) -> Verdict {
    match found {
        Some((_, e)) => Verdict::by(e.reason, e.rule),
        None => Verdict::GLOBAL,
    }
}
