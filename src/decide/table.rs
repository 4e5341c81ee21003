//! A longest-prefix-match table, flattened into sorted disjoint ranges.
//!
//! Nested blocks (a `/32` carve-out inside a `/24` inside a `/8`) are resolved once, when the
//! table is built: every address range maps to the most specific block that contains it. A
//! lookup is then one binary search over a few dozen ranges, with no allocation.

use std::net::IpAddr;

use ipnet::IpNet;

/// One family's table (IPv4 or IPv6) of `T` values keyed by prefix.
#[derive(Clone, Debug)]
pub(crate) struct PrefixTable<T> {
    /// Sorted by `start`; each range runs up to the next range's start.
    starts: Vec<u128>,
    /// The most specific entry for each range, and its prefix length.
    values: Vec<Option<(u8, T)>>,
}

impl<T: Copy> PrefixTable<T> {
    /// Builds a table from `(network, value)` pairs of one address family. When two entries
    /// have the same network, the later one wins (callers reject duplicates before this).
    pub(crate) fn build(entries: &[(IpNet, T)]) -> Self {
        let ranges: Vec<(u128, u128, u8, T)> = entries
            .iter()
            .map(|(net, v)| {
                let (start, end) = bounds(net);
                (start, end, net.prefix_len(), *v)
            })
            .collect();

        let mut cuts: Vec<u128> = vec![0];
        for (start, end, _, _) in &ranges {
            cuts.push(*start);
            if let Some(next) = end.checked_add(1) {
                cuts.push(next);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();

        let mut starts = Vec::with_capacity(cuts.len());
        let mut values: Vec<Option<(u8, T)>> = Vec::with_capacity(cuts.len());
        for cut in cuts {
            let best = ranges
                .iter()
                .filter(|(s, e, _, _)| *s <= cut && cut <= *e)
                .max_by_key(|(_, _, len, _)| *len)
                .map(|(_, _, len, v)| (*len, *v));
            starts.push(cut);
            values.push(best);
        }
        Self { starts, values }
    }

    /// The most specific entry containing `addr` (as a number), with its prefix length.
    pub(crate) fn lookup(&self, addr: u128) -> Option<(u8, T)> {
        let idx = self.starts.partition_point(|s| *s <= addr);
        // `starts[0]` is always 0, so `idx` is at least 1.
        self.values.get(idx.checked_sub(1)?).copied().flatten()
    }
}

/// First and last address of `net`, as numbers of its own family.
pub(crate) fn bounds(net: &IpNet) -> (u128, u128) {
    match net {
        IpNet::V4(n) => (
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}

/// An address as a number of its own family.
pub(crate) fn number(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn most_specific_entry_wins_and_gaps_are_empty() {
        let t = PrefixTable::build(&[
            (net("192.0.0.0/24"), 'a'),
            (net("192.0.0.0/29"), 'b'),
            (net("192.0.0.9/32"), 'c'),
            (net("10.0.0.0/8"), 'd'),
        ]);
        let at = |s: &str| t.lookup(number(s.parse().unwrap())).map(|(_, v)| v);
        assert_eq!(at("192.0.0.0"), Some('b'));
        assert_eq!(at("192.0.0.7"), Some('b'));
        assert_eq!(at("192.0.0.8"), Some('a'));
        assert_eq!(at("192.0.0.9"), Some('c'));
        assert_eq!(at("192.0.0.10"), Some('a'));
        assert_eq!(at("192.0.0.255"), Some('a'));
        assert_eq!(at("192.0.1.0"), None);
        assert_eq!(at("9.255.255.255"), None);
        assert_eq!(at("10.255.255.255"), Some('d'));
        assert_eq!(at("11.0.0.0"), None);
        assert_eq!(at("0.0.0.0"), None);
    }

    #[test]
    fn top_of_the_space_is_covered() {
        let t = PrefixTable::build(&[(net("ff00::/8"), 1u8), (net("::/128"), 2u8)]);
        assert_eq!(t.lookup(u128::MAX).map(|(_, v)| v), Some(1));
        assert_eq!(t.lookup(0).map(|(_, v)| v), Some(2));
        assert_eq!(t.lookup(1), None);
    }
}
