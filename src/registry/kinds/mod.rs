//! Every registry kind fetchgate serves, one folder each, and the table of their rows. A new
//! kind is one more folder and one more row here; the core, the store, the fetcher and the
//! serve layer do not change (the README says which other files it touches).

pub(crate) mod apt;
pub(crate) mod cargo;
pub(crate) mod go;
pub(crate) mod npm;
pub(crate) mod oci;
pub(crate) mod pypi;

use super::protocol::KindRow;

/// Every registry kind, in the order their names are listed.
pub(crate) const KINDS: &[&KindRow] = &[
    &npm::ROW,
    &pypi::ROW,
    &cargo::ROW,
    &oci::front::ROW,
    &go::front::ROW,
    &apt::front::ROW,
];

/// The kind called `name`, if fetchgate serves it.
pub(crate) fn named(name: &str) -> Option<&'static KindRow> {
    KINDS.iter().copied().find(|k| k.info.name == name)
}

/// Every kind's name, in table order.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.info.name)
}

/// The kind that takes `key` as one of its own, if one does.
pub(crate) fn owner_of(key: &str) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|k| k.keys.contains(&key))
        .map(|k| k.info.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_by_its_name_and_names_and_keys_are_unique() {
        let names: Vec<&str> = names().collect();
        for n in &names {
            assert_eq!(named(n).map(|k| k.info.name), Some(*n));
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert!(named("maven").is_none());
        let mut keys: Vec<&str> = KINDS.iter().flat_map(|k| k.keys.iter().copied()).collect();
        let all = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), all, "two kinds claim one key");
    }
}
