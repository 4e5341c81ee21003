//! The command line as people and scripts use it: text by default and `--json` everywhere,
//! cache commands that name their directory and never create one, `cache ls`/`rm`,
//! `config check` (and deploy/README's pre-flight on its own example), completions, the
//! environment in `--help`, and progress bars drawn only on a terminal.

use crate::support;

use std::path::Path;
use std::process::Output;

use fetchgate::store::Digest;
use serde_json::Value;
use support::config::Toml;
use support::upstream::{CountingListener, Reply, Upstream, pattern_bytes, tls_for};

/// Runs the binary in `dir` with `args`.
async fn run_in(dir: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .expect("run fetchgate")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)))
}

/// A folder with a config whose cache is `cache/` and that trusts `upstream`, and the
/// artifact fetched into it once.
struct Filled {
    dir: tempfile::TempDir,
    cfg: String,
    digest: Digest,
    url: String,
    _upstream: Upstream,
}

async fn filled(bytes: Vec<u8>) -> Filled {
    let upstream = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        Toml::new().cache_dir("cache").trust(upstream.addr).build(),
    )
    .unwrap();
    let digest = Digest::of(&bytes);
    let url = format!("http://{}/a.tgz", upstream.addr);
    let cfg = cfg.to_str().unwrap().to_string();
    let o = run_in(
        dir.path(),
        &[
            "fetch",
            "--config",
            &cfg,
            "--sha256",
            &digest.hex(),
            "--size",
            &bytes.len().to_string(),
            &url,
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    Filled {
        dir,
        cfg,
        digest,
        url,
        _upstream: upstream,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_commands_refuse_a_missing_directory_and_name_it_and_the_setting() {
    let elsewhere = tempfile::tempdir().unwrap();
    let default_dir = elsewhere.path().join("fetchgate-cache");
    for action in [
        &["cache", "stats"][..],
        &["cache", "ls"],
        &["cache", "verify"],
        &["cache", "gc"],
        &[
            "cache",
            "rm",
            "0000000000000000000000000000000000000000000000000000000000000000",
        ],
        &["love", "conflicts"],
        &["pack", "conflicts"],
    ] {
        let o = run_in(elsewhere.path(), action).await;
        assert_eq!(o.status.code(), Some(2), "{action:?}: {}", text(&o.stdout));
        let err = text(&o.stderr);
        assert!(
            err.contains(&default_dir.display().to_string()),
            "names the directory: {err}"
        );
        assert!(
            err.contains("[cache] dir") && err.contains("--config"),
            "names what sets it: {err}"
        );
        assert!(!default_dir.exists(), "{action:?} created {default_dir:?}");
    }

    // A config naming a cache that is not there: the error names the file and the path.
    let cfg = elsewhere.path().join("f.toml");
    std::fs::write(&cfg, Toml::new().cache_dir("nowhere").build()).unwrap();
    let o = run_in(
        elsewhere.path(),
        &["cache", "stats", "--config", cfg.to_str().unwrap()],
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("nowhere") && err.contains("f.toml"), "{err}");
    assert!(!elsewhere.path().join("nowhere").exists());

    // The twin: the same command on a cache that exists reads it and says which it read.
    let f = filled(pattern_bytes(5000)).await;
    let o = run_in(elsewhere.path(), &["cache", "stats", "--config", &f.cfg]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let cache = f.dir.path().join("cache").display().to_string();
    assert!(out.contains(&cache), "{out}");
    assert!(out.contains("entries        1"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_text_by_default_and_one_json_object_with_json() {
    let bytes = pattern_bytes(7000);
    let f = filled(bytes.clone()).await;
    let hex = f.digest.hex();
    let dir = f.dir.path();
    let size = bytes.len().to_string();
    let fetch = async |extra: &[&str]| {
        let mut args = vec![
            "fetch", "--config", &f.cfg, "--sha256", &hex, "--size", &size, &f.url,
        ];
        args.extend_from_slice(extra);
        run_in(dir, &args).await
    };
    let o = fetch(&[]).await;
    let out = text(&o.stdout);
    assert!(
        out.starts_with(&format!("verified sha256 {hex} (6.84 KiB (7000 bytes))")),
        "{out}"
    );
    assert!(
        serde_json::from_str::<Value>(&out).is_err(),
        "not JSON: {out}"
    );
    let v = json(&fetch(&["--json"]).await);
    assert_eq!(v["sha256"], hex.as_str());
    assert_eq!(v["verified"], true);

    let cfg = f.cfg.as_str();
    for (args, key) in [
        (&["cache", "stats", "--config", cfg][..], "stats"),
        (&["cache", "ls", "--config", cfg], "entries"),
        (&["cache", "verify", "--config", cfg], "ok"),
        (&["cache", "gc", "--config", cfg], "evicted"),
        (&["config", "check", "--config", cfg], "cache"),
        (&["profile"], "refuse"),
    ] {
        let mut a = args.to_vec();
        let human = run_in(dir, &a).await;
        assert_eq!(
            human.status.code(),
            Some(0),
            "{a:?}: {}",
            text(&human.stderr)
        );
        assert!(
            serde_json::from_slice::<Value>(&human.stdout).is_err(),
            "{a:?} prints text by default: {}",
            text(&human.stdout)
        );
        a.push("--json");
        let v = json(&run_in(dir, &a).await);
        assert!(v.get(key).is_some(), "{a:?}: {v}");
    }

    // A failed fetch: text on standard error naming each locator; JSON on standard output.
    let absent = Digest::of(b"absent").hex();
    let fail = async |json: bool| {
        let mut args = vec![
            "fetch", "--config", &f.cfg, "--sha256", &absent, "--size", "10", &f.url,
        ];
        if json {
            args.push("--json");
        }
        run_in(dir, &args).await
    };
    let o = fail(false).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = text(&o.stderr);
    assert!(
        err.contains(&f.url) && err.contains("size_mismatch"),
        "{err}"
    );
    let o = fail(true).await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json(&o)["locators"][0]["code"], "size_mismatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_ls_lists_entries_and_rm_removes_one_but_not_a_pinned_or_absent_one() {
    let f = filled(pattern_bytes(3000)).await;
    let (dir, hex) = (f.dir.path(), f.digest.hex());
    let cfg = f.cfg.as_str();
    let o = run_in(dir, &["cache", "ls", "--config", cfg]).await;
    let out = text(&o.stdout);
    assert!(out.contains(&hex) && out.contains("3000"), "{out}");
    let v = json(&run_in(dir, &["cache", "ls", "--json", "--config", cfg]).await);
    assert_eq!(v["entries"][0]["sha256"], hex.as_str());
    let object = dir.join("cache/objects/sha256").join(&hex[..2]).join(&hex);
    assert!(object.exists());

    // Pinned: refused, still there.
    assert!(
        run_in(dir, &["cache", "pin", &hex, "--config", cfg])
            .await
            .status
            .success()
    );
    let o = run_in(dir, &["cache", "rm", &hex, "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("pinned"), "{}", text(&o.stdout));
    assert!(object.exists());

    // Unpinned: removed, file and record.
    assert!(
        run_in(dir, &["cache", "unpin", &hex, "--config", cfg])
            .await
            .status
            .success()
    );
    let o = run_in(dir, &["cache", "rm", &hex, "--json", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(json(&o)["removed"], true);
    assert!(!object.exists());
    let v = json(&run_in(dir, &["cache", "ls", "--json", "--config", cfg]).await);
    assert_eq!(v["entries"].as_array().map(Vec::len), Some(0), "{v}");

    // Absent: exit 1; a malformed digest: exit 2 naming the rule.
    let o = run_in(dir, &["cache", "rm", &hex, "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(1));
    let o = run_in(dir, &["cache", "rm", "NOTHEX", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("64 lowercase hex"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_prints_the_settings_creating_no_cache_and_sending_nothing() {
    let dns = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let upstream = CountingListener::start("127.0.0.2:0").await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        Toml::new()
            .cache("c", "max_bytes = 1048576")
            .trust(upstream.addr)
            .section(
                "resolver",
                &format!("nameservers = [\"{}\"]", dns.local_addr().unwrap()),
            )
            .raw(&format!(
                "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"http://{}/\"\n",
                upstream.addr
            ))
            .build(),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let o = run_in(dir.path(), &["config", "check", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with(&format!("valid  {cfg}")), "{out}");
    assert!(out.contains("[[registry]] npm (npm)"), "{out}");
    let v = json(&run_in(dir.path(), &["config", "check", "--json", "--config", cfg]).await);
    assert_eq!(v["valid"], true);
    assert_eq!(v["cache"]["max_bytes"], 1_048_576);
    assert_eq!(v["cache"]["dir_exists"], false);
    assert_eq!(v["registries"][0]["kind"], "npm");
    assert_eq!(
        v["resolver"]["nameservers"][0],
        dns.local_addr().unwrap().to_string()
    );
    assert!(!dir.path().join("c").exists(), "no cache directory created");
    let mut buf = [0u8; 512];
    assert!(dns.try_recv_from(&mut buf).is_err(), "no DNS query sent");
    assert_eq!(upstream.accepted(), 0, "no upstream connection");

    // The twin: an unknown key is exit 2 naming the file, line and key.
    std::fs::write(dir.path().join("bad.toml"), "[cache]\nmax_byte = 1\n").unwrap();
    let o = run_in(
        dir.path(),
        &[
            "config",
            "check",
            "--warn-missing-files",
            "--config",
            "bad.toml",
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("bad.toml:2") && err.contains("max_byte"),
        "{err}"
    );
}

/// deploy/README's pre-flight, on deploy/fetchgate.example.toml installed as the README
/// says (with its corp-ca.pem beside it; the tokens file exists only inside the unit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_preflight_runs_green_on_its_own_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("deploy/README.md")).unwrap();
    let preflight =
        "fetchgate config check --config /etc/fetchgate/fetchgate.toml --warn-missing-files";
    assert!(
        readme.contains(preflight),
        "deploy/README names the pre-flight"
    );
    let example = std::fs::read_to_string(root.join("deploy/fetchgate.example.toml")).unwrap();
    assert!(example.contains("tokens_file = \"/run/credentials/fetchgate.service/tokens\""));
    let etc = tempfile::tempdir().unwrap();
    std::fs::write(etc.path().join("fetchgate.toml"), &example).unwrap();
    std::fs::write(
        etc.path().join("corp-ca.pem"),
        tls_for(&["mirror.corp.example"]).1,
    )
    .unwrap();
    let cfg = etc.path().join("fetchgate.toml");
    let cfg = cfg.to_str().unwrap();

    // Without the flag the missing tokens file is an error naming it (as serve would say).
    let o = run_in(etc.path(), &["config", "check", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("tokens_file"),
        "{}",
        text(&o.stderr)
    );

    let args: Vec<&str> = preflight
        .split(' ')
        .skip(1)
        .map(|a| {
            if a.ends_with("fetchgate.toml") {
                cfg
            } else {
                a
            }
        })
        .collect();
    let o = run_in(etc.path(), &args).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("warning") && out.contains("access.tokens_file"),
        "{out}"
    );
    assert!(out.contains("[[registry]] crates-io (cargo)"), "{out}");

    // The twins: a missing CA file and a typo are still errors with the flag.
    std::fs::remove_file(etc.path().join("corp-ca.pem")).unwrap();
    let o = run_in(etc.path(), &args).await;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("corp-ca.pem"),
        "{}",
        text(&o.stderr)
    );
    std::fs::write(etc.path().join("corp-ca.pem"), tls_for(&["x"]).1).unwrap();
    std::fs::write(
        etc.path().join("fetchgate.toml"),
        example.replace("max_redirects = 5", "max_redirect = 5"),
    )
    .unwrap();
    let o = run_in(etc.path(), &args).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("max_redirect"),
        "{}",
        text(&o.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_are_printed_for_bash_zsh_and_fish_and_help_names_fetchgate_log() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F _fetchgate"),
        ("zsh", "#compdef fetchgate"),
        ("fish", "complete -c fetchgate"),
    ] {
        let o = run_in(dir.path(), &["completions", shell]).await;
        assert_eq!(o.status.code(), Some(0));
        let out = text(&o.stdout);
        assert!(out.contains(marker), "{shell}: {out}");
        assert!(
            out.contains("config") && out.contains("rm"),
            "{shell} knows the commands"
        );
    }
    let o = run_in(dir.path(), &["completions", "tcsh"]).await;
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );

    for args in [&["--help"][..], &["serve", "--help"]] {
        let o = run_in(dir.path(), args).await;
        let out = text(&o.stdout);
        assert!(out.contains("FETCHGATE_LOG"), "{args:?}: {out}");
    }
    assert!(!dir.path().join("fetchgate-cache").exists());
}

/// Runs `args` under a pseudo-terminal (util-linux `script`) and returns what it drew.
async fn on_a_terminal(dir: &Path, args: &[&str]) -> String {
    let command = std::iter::once(env!("CARGO_BIN_EXE_fetchgate"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let o = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("COLUMNS", "120")
        .current_dir(dir)
        .output()
        .await
        .expect("run script(1) from util-linux");
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_bars_are_drawn_on_a_terminal_and_never_into_a_pipe() {
    let bytes = pattern_bytes(3 << 20);
    let f = filled(pattern_bytes(1000)).await;
    let big = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    std::fs::write(
        &f.cfg,
        Toml::new().cache_dir("cache").trust(big.addr).build(),
    )
    .unwrap();
    let d = Digest::of(&bytes);
    let url = format!("http://{}/big", big.addr);
    let size = bytes.len().to_string();
    let fetch = [
        "fetch",
        "--config",
        &f.cfg,
        "--sha256",
        &d.hex(),
        "--size",
        &size,
        &url,
    ];

    // Piped: standard error stays empty, standard output holds only the result.
    let o = run_in(f.dir.path(), &fetch).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let o = run_in(f.dir.path(), &["cache", "verify", "--config", &f.cfg]).await;
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains('['));

    // On a terminal: the bar is drawn with the total it works towards.
    let rm = run_in(f.dir.path(), &["cache", "rm", &d.hex(), "--config", &f.cfg]).await;
    assert!(rm.status.success());
    let drawn = on_a_terminal(f.dir.path(), &fetch).await;
    assert!(
        drawn.contains(&format!("fetch {}", &d.hex()[..12])),
        "{drawn:?}"
    );
    assert!(drawn.contains("3.00 MiB"), "{drawn:?}");
    let drawn = on_a_terminal(f.dir.path(), &["cache", "verify", "--config", &f.cfg]).await;
    assert!(drawn.contains("verify ["), "{drawn:?}");
}
