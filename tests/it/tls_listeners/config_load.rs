//! TLS and policy tables at load: typos and impossible tables refused naming the field, policies
//! that would widen the global one or never apply refused, and the example's blocks loading.

use std::path::Path;

use fetchgate::config::Config;

use super::{Pki, tls_table};

/// The config error for `text` (files relative to `base`).
fn refused(text: &str, base: &Path) -> String {
    Config::from_toml_in("f.toml", text, base)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_typo_or_an_impossible_tls_table_is_refused_at_load_naming_the_field() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let (other_cert, _) = pki.server_files("other");
    let ca = pki.ca_file();
    let base = pki.dir.path();
    let c = cert.display().to_string();
    // The good table loads.
    let good = tls_table("proxy", &cert, &key, "");
    Config::from_toml_in("f.toml", &good, base).unwrap();

    let e = refused(&format!("[listen.tls.proxy]\ncert = {c:?}\n"), base);
    assert!(
        e.contains("`key` is missing") && e.contains("listen.tls.proxy"),
        "{e}"
    );
    let e = refused(
        &format!("[listen.tls.proxy]\ncert = {c:?}\nkeys = \"x\"\n"),
        base,
    );
    assert!(e.contains("keys"), "{e}");
    let e = refused(&format!("[listen.tls.proxi]\ncert = {c:?}\n"), base);
    assert!(e.contains("proxi"), "{e}");
    let e = refused(&tls_table("proxy", &other_cert, &key, ""), base);
    eprintln!("{e}");
    assert!(e.contains("not a usable certificate and key pair"), "{e}");
    assert!(
        e.contains("field `listen.tls.proxy.key`") || e.contains("key"),
        "{e}"
    );
    let e = refused(
        &tls_table("proxy", &cert, &key, "client_auth = \"required\""),
        base,
    );
    assert!(e.contains("client_auth needs `client_ca`"), "{e}");
    let extra = format!(
        "client_ca = {:?}\nclient_auth = \"maybe\"",
        ca.display().to_string()
    );
    let e = refused(&tls_table("proxy", &cert, &key, &extra), base);
    assert!(e.contains("`required` or `optional`"), "{e}");
    let e = refused(&tls_table("proxy", &key, &key, ""), base);
    assert!(e.contains("holds no PEM certificate"), "{e}");
}

#[test]
fn a_policy_that_would_widen_the_global_one_or_never_apply_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "ci tok-1\nnameless-token\n").unwrap();
    let base = dir.path();
    let with = |policy: &str| {
        format!(
            "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"https://registry.npmjs.org/\"\n\n\
             [access]\ntokens_file = \"tokens\"\n\n[[access.policy]]\nname = \"ci\"\n{policy}\n"
        )
    };
    // The good one loads.
    Config::from_toml_in(
        "f.toml",
        &with("clients = [\"token:ci\"]\nhosts = [\"*.npmjs.org\", \"127.0.0.2\"]\nregistries = [\"npm\"]\nports = [443]"),
        base,
    )
    .unwrap();
    for (policy, field, want) in [
        (
            "clients = [\"token:ci\"]\nports = [8443]",
            "ports",
            "port 8443 is not allowed by the global policy",
        ),
        (
            "clients = [\"token:ci\"]\nregistries = [\"pypi\"]",
            "registries",
            "no [[registry]] is named `pypi`",
        ),
        (
            "clients = [\"token:nobody\"]",
            "clients",
            "no token in [access] tokens_file is named `nobody`",
        ),
        (
            "clients = [\"cert:ci-runner\"]",
            "clients",
            "no [listen.tls.*] table has a `client_ca`",
        ),
        (
            "clients = [\"crt:ci-runner\"]",
            "clients",
            "is not a client identity",
        ),
        ("clients = []", "clients", "list the clients"),
        (
            "clients = [\"token:ci\"]\nhost = [\"x\"]",
            "host",
            "unknown field `host`",
        ),
        (
            "clients = [\"token:ci\"]\nhosts = [\"*.\"]",
            "hosts",
            "`*.`",
        ),
        (
            "clients = [\"token:ci\", \"token:ci\"]",
            "clients",
            "already selects policy `ci`",
        ),
    ] {
        let e = refused(&with(policy), base);
        assert!(e.contains(want), "{policy}: {e}");
        assert!(
            e.contains("f.toml:1") && e.contains(&format!(": access.policy[0].{field}: ")),
            "{policy}: {e}"
        );
    }
    // Two policies with one name, or claiming one identity.
    let e = refused(
        &format!(
            "{}\n[[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\n",
            with("clients = [\"token:ci\"]")
        ),
        base,
    );
    assert!(e.contains("already defined"), "{e}");
}

/// The commented TLS and policy blocks of the shipped example, uncommented, load with the
/// real parser (so the documented keys and forms stay true).
#[test]
fn the_example_configs_tls_and_policy_blocks_load_when_uncommented() {
    let pki = Pki::new("fetchgate test CA");
    std::fs::create_dir(pki.path("tls")).unwrap();
    for stem in ["proxy", "admin"] {
        let (cert, key) = pki.server_files(stem);
        std::fs::rename(cert, pki.path(&format!("tls/{stem}.pem"))).unwrap();
        std::fs::rename(key, pki.path(&format!("tls/{stem}.key"))).unwrap();
    }
    std::fs::rename(pki.ca_file(), pki.path("tls/clients-ca.pem")).unwrap();
    std::fs::write(pki.path("tokens"), "ci tok-1\nbuilder tok-2\n").unwrap();
    let example = std::fs::read_to_string("deploy/fetchgate.example.toml").unwrap();
    let mut out = String::new();
    let mut uncommenting = false;
    let mut blocks = 0;
    for line in example.lines() {
        if line == "# [listen.tls.proxy]" || (line == "# [[access.policy]]" && !uncommenting) {
            uncommenting = true;
            blocks += 1;
        }
        if uncommenting && !line.starts_with('#') {
            uncommenting = false;
        }
        let line = match line {
            l if l.starts_with("tokens_file") => "tokens_file = \"tokens\"",
            l if l.starts_with("extra_roots") => "",
            l if uncommenting => l.strip_prefix("# ").unwrap_or(""),
            l => l,
        };
        out.push_str(line);
        out.push('\n');
    }
    assert_eq!(blocks, 2, "both commented blocks were found");
    assert!(
        out.contains("\n[[access.policy]]\nname = \"builders\""),
        "{out}"
    );
    let config = Config::from_toml_in("fetchgate.example.toml", &out, pki.dir.path());
    config.unwrap_or_else(|e| panic!("{e}"));
}
