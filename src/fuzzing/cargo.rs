//! cargo: sparse index files and `config.json`.

use super::reach::cargo;
use super::{first_line, text};

/// An index file; the first line is `name version`. Property: a checksum found for a version
/// is the `cksum` of a line naming that crate (any case) and exactly that version.
pub fn cargo_index(data: &[u8]) {
    let (ask, index) = first_line(data);
    let Some((name, version)) = text(ask).and_then(|a| a.split_once(' ')) else {
        return;
    };
    let _ = cargo::upstream_dl(index);
    let Some((digest, _yanked)) = cargo::listed_checksum(index, name, version) else {
        return;
    };
    let text = text(index).unwrap_or_else(|| panic!("a checksum from an index that is not UTF-8"));
    let found = text.lines().any(|line| {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return false;
        };
        let s = |k: &str| v.get(k).and_then(|x| x.as_str());
        s("name").is_some_and(|n| n.eq_ignore_ascii_case(name))
            && s("vers") == Some(version)
            && s("cksum") == Some(digest.hex().as_str())
    });
    assert!(
        found,
        "{} is no line's cksum for {name} {version}",
        digest.hex()
    );
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::cargo;
    use crate::store::Digest;

    proptest! {
        #[test]
        fn our_config_json_sends_every_download_to_the_base_with_its_checksum(
            base in "https?://[a-z]{1,8}(:[0-9]{2,4})?/([a-z]{1,6}/){0,2}",
            name in "[a-zA-Z][a-zA-Z0-9_-]{0,20}",
            version in "[0-9]{1,2}\\.[0-9]{1,2}\\.[0-9]{1,2}(-[a-z0-9.]{1,6})?",
            bytes in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            let sha = Digest::of(&bytes);
            let dl = cargo::upstream_dl(&cargo::config_json(&base)).unwrap();
            prop_assert_eq!(
                cargo::download_url(&dl, &name, &version, &sha),
                format!("{base}-/crates/{name}/{version}/{}", sha.hex())
            );
        }

        #[test]
        fn an_upstream_template_is_filled_as_cargo_fills_it(
            name in "[a-z][a-z0-9_-]{0,20}",
            version in "[0-9]{1,2}\\.[0-9]{1,2}\\.[0-9]{1,2}",
        ) {
            let sha = Digest::of(name.as_bytes());
            let url = cargo::download_url(
                "https://dl.example/{prefix}/{crate}/{version}/{sha256-checksum}", &name, &version, &sha);
            let prefix = match name.len() {
                1 => "1".to_string(),
                2 => "2".to_string(),
                3 => format!("3/{}", &name[..1]),
                _ => format!("{}/{}", &name[..2], &name[2..4]),
            };
            prop_assert_eq!(url, format!("https://dl.example/{prefix}/{name}/{version}/{}", sha.hex()));
            prop_assert_eq!(
                cargo::download_url("https://dl.example/api/v1/crates", &name, &version, &sha),
                format!("https://dl.example/api/v1/crates/{name}/{version}/download")
            );
        }
    }
}
