//! Item 10: the command line reads as cargo's, ripgrep's and uv's do. `--config` is global
//! (before or after the subcommand, every old spelling still working) and `FETCHGATE_CONFIG`
//! is read; with `--json` every failure is one object with a `code`; each subcommand's help
//! says what `--json` prints; `-V` names the commit; `config check` prints the settings in
//! force (trust, deny, access, policies, TLS, listen); `fetch -o` writes with the umask.

use super::{fetchgate, json_of, shown, text};
use crate::support;

use std::os::unix::fs::PermissionsExt;

use fetchgate::store::Digest;
use support::config::Toml;
use support::upstream::{Reply, Upstream, pattern_bytes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_is_global_and_read_from_fetchgate_config_and_old_spellings_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.toml");
    let b = dir.path().join("b.toml");
    for f in [&a, &b] {
        std::fs::write(f, Toml::new().cache_dir(dir.path().join("cache")).build()).unwrap();
    }
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let file_of = |o: &std::process::Output| json_of(o)["file"].as_str().unwrap().to_string();
    let d = dir.path();
    for args in [
        vec!["--config", a_s, "config", "check", "--json"],
        vec!["config", "--config", a_s, "check", "--json"],
        vec!["config", "check", "--json", "--config", a_s],
        vec!["--json", "config", "check", "--config", a_s],
    ] {
        let o = fetchgate(d, &args, &[]).await;
        assert!(o.status.success(), "{args:?}: {}", shown(&o));
        assert_eq!(file_of(&o), a_s, "{args:?}");
    }
    let o = fetchgate(
        d,
        &["config", "check", "--json"],
        &[("FETCHGATE_CONFIG", a_s)],
    )
    .await;
    assert_eq!(file_of(&o), a_s, "{}", shown(&o));
    let o = fetchgate(
        d,
        &["config", "check", "--json", "--config", b_s],
        &[("FETCHGATE_CONFIG", a_s)],
    )
    .await;
    assert_eq!(file_of(&o), b_s, "the flag wins over the variable");
    let o = fetchgate(d, &["config", "check", "--json"], &[]).await;
    assert!(json_of(&o)["file"].is_null(), "the embedded defaults");

    // The spellings every command had keep working (a cache is made first).
    std::fs::create_dir_all(dir.path().join("cache")).unwrap();
    for args in [
        vec!["cache", "--config", a_s, "ls"],
        vec!["cache", "ls", "--config", a_s],
        vec!["love", "--config", a_s, "conflicts"],
        vec!["pack", "conflicts", "--config", a_s],
        vec!["check", "--config", a_s, "http://127.0.0.9/"],
    ] {
        let o = fetchgate(d, &args, &[]).await;
        assert!(
            o.status.code() == Some(0) || (args[0] == "check" && o.status.code() == Some(1)),
            "{args:?}: {}",
            shown(&o)
        );
    }
    let o = fetchgate(d, &["cache", "ls"], &[("FETCHGATE_CONFIG", a_s)]).await;
    assert!(
        o.status.success(),
        "the variable reaches every command: {}",
        shown(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_json_every_failure_is_one_object_with_a_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let typo = d.join("typo.toml");
    std::fs::write(&typo, "[egress]\nmax_redirect = 5\n").unwrap();
    let missing_cache = d.join("nocache.toml");
    std::fs::write(&missing_cache, "[cache]\ndir = \"nowhere\"\n").unwrap();
    // `serve` failing to start: a cache directory that is a file, an admin address in use.
    std::fs::write(d.join("a-file"), "not a directory").unwrap();
    let file_cache = d.join("filecache.toml");
    std::fs::write(
        &file_cache,
        "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[cache]\ndir = \"a-file\"\n",
    )
    .unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin_taken = d.join("admin.toml");
    std::fs::write(
        &admin_taken,
        format!(
            "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"{}\"\n\n[cache]\ndir = \"cache\"\n",
            taken.local_addr().unwrap()
        ),
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--json", "cache", "frobnicate"], "usage_error"),
        (vec!["fetch", "--json", "--sha256"], "usage_error"),
        (vec!["--json", "completions", "bash"], "usage_error"),
        (
            vec![
                "--json",
                "config",
                "check",
                "--config",
                typo.to_str().unwrap(),
            ],
            "config_invalid",
        ),
        (
            vec![
                "--json",
                "cache",
                "ls",
                "--config",
                missing_cache.to_str().unwrap(),
            ],
            "cache_missing",
        ),
        (
            vec![
                "--json",
                "cache",
                "pin",
                "not-a-digest",
                "--config",
                missing_cache.to_str().unwrap(),
            ],
            "cache_missing",
        ),
        (
            vec!["--json", "serve", "--config", file_cache.to_str().unwrap()],
            "cache_unavailable",
        ),
        (
            vec![
                "--json",
                "cache",
                "ls",
                "--config",
                file_cache.to_str().unwrap(),
            ],
            "cache_unavailable",
        ),
        (
            vec!["--json", "serve", "--config", admin_taken.to_str().unwrap()],
            "listen_failed",
        ),
    ];
    for (args, code) in cases {
        let o = fetchgate(d, &args, &[]).await;
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", shown(&o));
        let v = json_of(&o);
        assert_eq!(v["code"], code, "{args:?}: {v}");
        assert!(!v["error"].as_str().unwrap_or("").is_empty(), "{v}");
    }
    let v = json_of(
        &fetchgate(
            d,
            &[
                "--json",
                "config",
                "check",
                "--config",
                typo.to_str().unwrap(),
            ],
            &[],
        )
        .await,
    );
    assert_eq!(v["line"], 2, "{v}");
    assert_eq!(v["field"], "egress.max_redirect", "{v}");
    let v = json_of(
        &fetchgate(
            d,
            &["--json", "serve", "--config", admin_taken.to_str().unwrap()],
            &[],
        )
        .await,
    );
    assert_eq!(v["field"], "listen.admin", "{v}");
    drop(taken);
    // The twin: without --json, the same failures are text for people on standard error.
    let o = fetchgate(d, &["cache", "frobnicate"], &[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty() && text(&o.stderr).contains("frobnicate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_names_the_commit_and_each_help_says_what_json_prints() {
    let d = tempfile::tempdir().unwrap();
    let o = fetchgate(d.path(), &["-V"], &[]).await;
    assert_eq!(
        text(&o.stdout).trim(),
        format!("fetchgate {}", fetchgate::VERSION)
    );
    assert!(
        fetchgate::VERSION.contains("(commit "),
        "{}",
        fetchgate::VERSION
    );
    for (cmd, says) in [
        (vec!["serve"], "every log line"),
        (vec!["check"], "one object: locator, decision"),
        (vec!["fetch"], "one object: verified, sha256"),
        (vec!["config"], "upstreams (each with verdict"),
        (vec!["cache"], "one object per action"),
        (vec!["love"], "the result or refusal report"),
        (vec!["pack"], "the result or refusal report"),
        (vec!["profile"], "the profile as one object"),
        (vec!["completions"], "--json does not apply"),
    ] {
        let mut args = cmd.clone();
        args.push("--help");
        let out = text(&fetchgate(d.path(), &args, &[]).await.stdout);
        assert!(out.contains(says), "{cmd:?}: {out}");
        assert!(
            cmd[0] == "completions" || out.contains("FETCHGATE_CONFIG"),
            "{cmd:?}: {out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_prints_trust_deny_access_policies_tls_and_listen() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "ci tok-1\nbuild tok-2\n").unwrap();
    let cfg = dir.path().join("f.toml");
    std::fs::write(
        &cfg,
        "[listen]\nproxy = \"127.0.0.1:3128\"\nadmin = \"127.0.0.1:9128\"\n\n\
         [access]\nclients = [\"10.0.0.0/8\"]\ntokens_file = \"tokens\"\nhosts = [\"fetchgate.test\"]\n\n\
         [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nports = [443]\n\n\
         [[egress.trust]]\ncidrs = [\"10.20.30.40/32\"]\nports = [443]\nhosts = [\"mirror.corp.example\"]\n\n\
         [[egress.deny]]\ncidrs = [\"203.0.113.0/24\"]\nhosts = [\"*.file-drop.example\"]\n\n\
         [[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"https://registry.npmjs.org/\"\nlisten = \"127.0.0.1:4873\"\n",
    )
    .unwrap();
    let o = fetchgate(
        dir.path(),
        &[
            "config",
            "check",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{}", shown(&o));
    let v = json_of(&o);
    assert_eq!(v["egress"]["trust"][0]["cidrs"][0], "10.20.30.40/32", "{v}");
    assert_eq!(v["egress"]["trust"][0]["hosts"][0], "mirror.corp.example");
    assert_eq!(v["egress"]["deny"][0]["hosts"][0], "*.file-drop.example");
    assert_eq!(v["access"]["clients"][0], "10.0.0.0/8");
    assert_eq!(v["access"]["tokens"], 2);
    assert_eq!(v["access"]["hosts"][0], "fetchgate.test");
    assert_eq!(v["access"]["policies"][0]["name"], "ci");
    assert_eq!(v["access"]["policies"][0]["clients"][0], "token:ci");
    assert_eq!(v["tls"]["proxy"], "plain HTTP");
    assert_eq!(v["listen"]["registries"][0], "npm 127.0.0.1:4873");
    assert_eq!(
        v["registries"][0]["client"],
        "npm config set registry http://127.0.0.1:4873/"
    );
    let printed = o.stdout.clone();
    assert!(
        !text(&printed).contains("tok-1"),
        "no token is ever printed"
    );
    let o = fetchgate(
        dir.path(),
        &["config", "check", "--config", cfg.to_str().unwrap()],
        &[],
    )
    .await;
    let out = text(&o.stdout);
    for want in [
        "[access]",
        "[tls]",
        "10.20.30.40/32",
        "*.file-drop.example",
        "\"ci\"",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    assert!(!out.contains("tok-1"));
}

/// `fetch -o` writes a new file as any tool does: `0666` less the umask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_output_files_get_the_usual_mode_under_the_umask() {
    let bytes = pattern_bytes(2000);
    let mirror = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("f.toml");
    std::fs::write(
        &cfg,
        Toml::new()
            .trust(mirror.addr)
            .cache_dir(dir.path().join("cache"))
            .build(),
    )
    .unwrap();
    let hex = Digest::of(&bytes).hex();
    for (umask, mode) in [("022", 0o644), ("077", 0o600), ("002", 0o664)] {
        let out = dir.path().join(format!("out-{umask}.bin"));
        let script = format!(
            "umask {umask}; exec \"$0\" fetch --config \"$1\" --sha256 {hex} --size 2000 -o \"$2\" http://{}/a.bin",
            mirror.addr
        );
        let o = tokio::process::Command::new("sh")
            .args(["-c", &script, env!("CARGO_BIN_EXE_fetchgate")])
            .arg(&cfg)
            .arg(&out)
            .env_remove("FETCHGATE_CONFIG")
            .output()
            .await
            .unwrap();
        assert!(o.status.success(), "{}", shown(&o));
        let got = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(got, mode, "umask {umask}: {got:o}");
        assert_eq!(std::fs::read(&out).unwrap(), bytes);
    }
}
