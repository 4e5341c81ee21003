//! Item 10, `cache rm`: it takes a unique prefix and several digests, resolves them all
//! before removing any, and forgets the registry aliases and verified URLs that pointed at
//! each entry it removed.

use super::{fetchgate, json_of, shown};
use crate::support;

use support::registry::{FakeRegistry, Gatekeeper, npm_tarball, publish_npm, sha256_hex};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_rm_takes_prefixes_and_several_digests_and_forgets_their_aliases() {
    let reg = FakeRegistry::start().await;
    let one = npm_tarball("fg-rm-one", "1.0.0", &[]);
    let two = npm_tarball("fg-rm-two", "1.0.0", &[]);
    publish_npm(&reg, "fg-rm-one", &[("1.0.0", vec![], one.clone())]);
    publish_npm(&reg, "fg-rm-two", &[("1.0.0", vec![], two.clone())]);
    let fg = Gatekeeper::start(
        &reg,
        &format!(
            "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n",
            reg.base()
        ),
    )
    .await;
    for name in ["fg-rm-one", "fg-rm-two"] {
        let got = fg
            .get(&format!("/registry/npm/{name}/-/{name}-1.0.0.tgz"), &[])
            .await;
        assert_eq!(got.status, 200);
    }
    let cfg = fg.dir.path().join("cli.toml");
    std::fs::write(
        &cfg,
        format!(
            "[cache]\ndir = {:?}\n",
            fg.dir.path().join("cache").display().to_string()
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let dir = fg.dir.path();
    let aliases = async || {
        let o = fetchgate(dir, &["cache", "stats", "--json", "--config", cfg], &[]).await;
        assert!(o.status.success(), "{}", shown(&o));
        json_of(&o)["stats"]["registry_aliases"].clone()
    };
    assert_eq!(aliases().await, 2);
    let (one, two) = (sha256_hex(&one), sha256_hex(&two));

    // A bad argument anywhere removes nothing.
    for bad in ["abc", "NOTHEX"] {
        let o = fetchgate(
            dir,
            &["cache", "rm", "--json", &one[..8], bad, "--config", cfg],
            &[],
        )
        .await;
        assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
        assert_eq!(json_of(&o)["code"], "invalid_argument");
    }
    let o = fetchgate(dir, &["cache", "ls", "--json", "--config", cfg], &[]).await;
    assert_eq!(json_of(&o)["entries"].as_array().map(Vec::len), Some(2));

    // A prefix that matches nothing is an absent entry: exit 1, the others still removed.
    let nothing = if one.starts_with("ffff") {
        "0000"
    } else {
        "ffff"
    };
    let nothing = if two.starts_with(nothing) {
        "fffe"
    } else {
        nothing
    };
    let o = fetchgate(
        dir,
        &[
            "cache",
            "rm",
            "--json",
            &one[..8],
            &two,
            nothing,
            "--config",
            cfg,
        ],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let v = json_of(&o);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{v}");
    assert_eq!(entries[0]["sha256"], one.as_str(), "the prefix, resolved");
    for e in &entries[..2] {
        assert_eq!(e["removed"], true, "{v}");
        assert!(e["aliases_removed"].as_u64().unwrap() >= 1, "{v}");
    }
    assert_eq!(entries[2]["removed"], false);
    let o = fetchgate(dir, &["cache", "ls", "--json", "--config", cfg], &[]).await;
    assert_eq!(json_of(&o)["entries"].as_array().map(Vec::len), Some(0));
    assert_eq!(aliases().await, 0, "no alias points at a removed entry");
}
