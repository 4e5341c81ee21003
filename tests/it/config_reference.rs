//! docs/config.md stays true to the parser: every section and key the config structs accept
//! has its row (type, default, reload), and the document names nothing the parser refuses.
//!
//! The keys are not listed here by hand: they are asked of the real parser. Every table is
//! `deny_unknown_fields`, so a probe key in a table is refused with the list of keys it
//! takes; a key that accepts a table (or an array of tables) of its own is probed in turn.

use std::collections::BTreeSet;

use fetchgate::config::Config;

/// The key the probes add; no table has it.
const PROBE: &str = "zzz_probe";

/// One step of a path: a table, or an array of tables.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Table,
    Array,
}

/// The TOML that opens the table at `path` and sets the probe key in it.
fn probe_text(path: &[(String, Shape)]) -> String {
    let mut text = String::new();
    for i in 0..path.len() {
        let dotted = path[..=i]
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(".");
        match path[i].1 {
            Shape::Array => text.push_str(&format!("[[{dotted}]]\n")),
            Shape::Table if i + 1 == path.len() => text.push_str(&format!("[{dotted}]\n")),
            Shape::Table => {}
        }
    }
    text.push_str(&format!("{PROBE} = 1\n"));
    text
}

/// The keys the table at `path` takes, or `None` if `path` is not a table of that shape.
fn keys_of(path: &[(String, Shape)]) -> Option<Vec<String>> {
    let err = match Config::from_toml("probe.toml", &probe_text(path)) {
        Ok(_) => panic!("the parser accepted the unknown key {PROBE} at {path:?}"),
        Err(e) => e.message,
    };
    let rest = err.strip_prefix(&format!("unknown field `{PROBE}`, "))?;
    if rest.starts_with("there are no fields") {
        return Some(Vec::new());
    }
    let list = rest
        .strip_prefix("expected one of ")
        .or_else(|| rest.strip_prefix("expected "))?;
    Some(
        list.split(", ")
            .flat_map(|k| k.split(" or "))
            .map(|k| k.trim_matches('`').to_string())
            .collect(),
    )
}

/// Every key the parser accepts: (dotted leaf keys, dotted tables with their shape).
fn parser_keys() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut leaves = BTreeSet::new();
    let mut tables = BTreeSet::new();
    let mut todo: Vec<Vec<(String, Shape)>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let keys = if path.is_empty() {
            keys_of_root()
        } else {
            keys_of(&path).unwrap_or_else(|| panic!("{path:?} was probed as a table"))
        };
        for key in keys {
            let mut found = None;
            for shape in [Shape::Table, Shape::Array] {
                let mut sub = path.clone();
                sub.push((key.clone(), shape));
                if keys_of(&sub).is_some() {
                    found = Some(sub);
                    break;
                }
            }
            let dotted = |p: &[(String, Shape)]| {
                p.iter()
                    .map(|(k, _)| k.as_str())
                    .chain(std::iter::once(key.as_str()))
                    .collect::<Vec<_>>()
                    .join(".")
            };
            match found {
                Some(sub) => {
                    tables.insert(heading(&sub));
                    todo.push(sub);
                }
                None => {
                    leaves.insert(dotted(&path));
                }
            }
        }
    }
    (leaves, tables)
}

/// The top-level sections, from a probe at the root.
fn keys_of_root() -> Vec<String> {
    keys_of(&[]).expect("the root table lists its sections")
}

/// How the document heads a table: `[cache]`, `[[registry]]`, `[[cache.tee]]`.
fn heading(path: &[(String, Shape)]) -> String {
    let dotted = path
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(".");
    match path.last().map(|(_, s)| *s) {
        Some(Shape::Array) => format!("[[{dotted}]]"),
        _ => format!("[{dotted}]"),
    }
}

/// What docs/config.md documents: (dotted keys with their rows, table headings).
fn documented() -> (Vec<(String, Vec<String>)>, BTreeSet<String>) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/config.md"))
        .expect("docs/config.md exists");
    let mut rows = Vec::new();
    let mut headings = BTreeSet::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with('#') {
            let table = line
                .split('`')
                .nth(1)
                .filter(|t| t.starts_with('[') && t.ends_with(']'));
            current = table.map(|t| t.trim_matches(|c| c == '[' || c == ']').to_string());
            if let Some(t) = table {
                headings.insert(t.to_string());
            }
        } else if let (Some(table), Some(row)) = (&current, line.strip_prefix("| `")) {
            let key = row.split('`').next().unwrap_or_default();
            let cells: Vec<String> = line
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect();
            rows.push((format!("{table}.{key}"), cells));
        }
    }
    (rows, headings)
}

#[test]
fn the_probe_finds_keys_the_parser_takes_and_only_those() {
    // The probe itself can fail: a known key, a known nested array, and a key that is not.
    let (leaves, tables) = parser_keys();
    assert!(leaves.contains("cache.max_bytes"), "{leaves:?}");
    assert!(leaves.contains("registry.upstream"), "{leaves:?}");
    assert!(tables.contains("[[egress.trust]]"), "{tables:?}");
    assert!(tables.contains("[cache]"), "{tables:?}");
    assert!(!leaves.contains("cache.tee"), "a table is not a leaf");
    assert!(!leaves.contains("cache.max_byte"));
}

#[test]
fn docs_config_md_lists_every_key_and_no_other() {
    let (leaves, tables) = parser_keys();
    let (rows, headings) = documented();
    let mut problems = Vec::new();
    for key in &leaves {
        if !rows.iter().any(|(k, _)| k == key) {
            let (table, name) = key.rsplit_once('.').unwrap_or(("", key));
            let heading = tables
                .iter()
                .find(|h| h.trim_matches(|c| c == '[' || c == ']') == table)
                .cloned()
                .unwrap_or_default();
            problems.push(format!(
                "docs/config.md has no row for `{key}` (a key the parser accepts): add `| `{name}` | type | default | reload | meaning |` under the heading `{heading}`"
            ));
        }
    }
    for table in &tables {
        if !headings.contains(table) {
            problems.push(format!(
                "docs/config.md has no heading for the table `{table}`: add a heading line naming `{table}` in backticks"
            ));
        }
    }
    for (key, cells) in &rows {
        if !leaves.contains(key) {
            problems.push(format!(
                "docs/config.md documents `{key}`, which the parser refuses: remove or rename the row"
            ));
        }
        if cells.len() != 5 || cells.iter().any(String::is_empty) {
            problems.push(format!(
                "docs/config.md's row for `{key}` needs five cells (key, type, default, reload, meaning): {cells:?}"
            ));
        }
    }
    for heading in &headings {
        if !tables.contains(heading) {
            problems.push(format!(
                "docs/config.md has a heading for `{heading}`, which the parser refuses"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_readme_shows_a_complete_loadable_block_and_a_client_line_for_every_registry_kind() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("## Registry pull-through")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has a registry section");
    let blocks: Vec<&str> = section
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .filter(|b| b.contains("[[registry]]"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("npm-token"), "token\n").unwrap();
    let mut kinds = Vec::new();
    for block in blocks {
        let file = dir.path().join("block.toml");
        std::fs::write(&file, block).unwrap();
        let loaded = Config::load(Some(&file));
        assert!(loaded.is_ok(), "{block}\n{:?}", loaded.err());
        let field = |key: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
                .and_then(|l| l.split('"').next())
                .unwrap_or_else(|| panic!("{key} in {block}"))
                .to_string()
        };
        let (name, kind) = (field("name"), field("kind"));
        let mount = format!("http://127.0.0.1:3128/registry/{name}/");
        let client = match kind.as_str() {
            "npm" => format!("npm config set registry {mount}"),
            "pypi" => format!("pip install --index-url {mount}"),
            "cargo" => format!("registry = \"sparse+{mount}\""),
            other => panic!("a kind the README does not know how to check: {other}"),
        };
        assert!(
            section.contains(&client),
            "the {kind} client line: {client}"
        );
        kinds.push(kind);
    }
    kinds.sort();
    assert_eq!(kinds, ["cargo", "npm", "pypi"], "one block per kind");
}
