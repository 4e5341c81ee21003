//! The operator's config file: every mistake is refused with the file, line and field, and
//! nothing in it can trust a cloud metadata destination. Pure: no sockets.

use fetchgate::config::Config;
use fetchgate::toml_file::FileError;

fn refused(text: &str) -> FileError {
    Config::from_toml("ops.toml", text).expect_err("must be refused")
}

#[test]
fn trusting_a_range_that_covers_metadata_is_refused_at_load() {
    let err = refused("[[egress.trust]]\ncidrs = [\"169.254.0.0/16\"]\nports = [80]\n");
    assert_eq!(err.file, "ops.toml");
    assert_eq!(err.line, Some(2));
    assert_eq!(err.field.as_deref(), Some("egress.trust[0].cidrs"), "{err}");
    assert!(err.message.contains("169.254.169.254"), "{err}");
    assert!(err.message.contains("cannot be trusted"), "{err}");
}

#[test]
fn every_way_of_trusting_metadata_is_refused() {
    for cidrs in [
        "\"0.0.0.0/0\"",
        "\"168.63.129.16/32\"",
        "\"100.100.100.0/24\"",
        "\"::/0\"",
        "\"fd00:ec2::/32\"",
        "\"127.0.0.1/32\", \"169.254.169.254/32\"",
    ] {
        let err = refused(&format!(
            "[[egress.trust]]\ncidrs = [{cidrs}]\nports = [443]\n"
        ));
        assert!(err.message.contains("cannot be trusted"), "{cidrs}: {err}");
    }
    let err = refused(
        "[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [80]\nhosts = [\"Metadata.Google.Internal.\"]\n",
    );
    assert!(err.message.contains("metadata"), "{err}");
    assert_eq!(err.line, Some(4));
}

#[test]
fn trust_rules_need_cidrs_and_ports() {
    let err = refused("[[egress.trust]]\nports = [80]\n");
    assert_eq!(err.field.as_deref(), Some("egress.trust[0].cidrs"), "{err}");
    let err = refused("[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\n");
    assert_eq!(err.field.as_deref(), Some("egress.trust[0].ports"), "{err}");
    let err = refused("[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = []\n");
    assert!(err.message.contains("non-empty `ports`"), "{err}");
    let err = refused("[[egress.trust]]\ncidrs = []\nports = [80]\n");
    assert!(err.message.contains("non-empty `cidrs`"), "{err}");
    let err = refused("[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [0]\n");
    assert!(err.message.contains("port 0"), "{err}");
    let err = refused("[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [70000]\n");
    assert_eq!(err.line, Some(3), "{err}");
}

#[test]
fn malformed_values_name_their_line_and_field() {
    let err = refused("[egress]\nports = [80]\n\n[[egress.deny]]\ncidrs = [\"10.1.0.0/8\"]\n");
    assert_eq!(err.line, Some(5));
    assert_eq!(err.field.as_deref(), Some("egress.deny[0].cidrs"));
    assert!(
        err.message.contains("10.0.0.0/8"),
        "suggests the network: {err}"
    );

    let err = refused("[[egress.deny]]\nhosts = [\"bad host\"]\n");
    assert_eq!(err.field.as_deref(), Some("egress.deny[0].hosts"), "{err}");

    let err = refused(
        "[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [80]\nhosts = [\"127.0.0.2\"]\n",
    );
    assert!(err.message.contains("put addresses in `cidrs`"), "{err}");

    let err = refused("[resolver]\nnameservers = [\"dns.example\"]\n");
    assert_eq!(err.field.as_deref(), Some("resolver.nameservers"), "{err}");

    let err = refused("[resolver]\ntimeout_ms = 0\n");
    assert_eq!(err.field.as_deref(), Some("resolver.timeout_ms"), "{err}");
}

#[test]
fn unknown_keys_and_tables_are_errors() {
    let err = refused("[egress]\nprots = [80]\n");
    assert_eq!(err.line, Some(2));
    assert_eq!(err.field.as_deref(), Some("egress.prots"), "{err}");
    let err = refused("[egres]\nports = [80]\n");
    assert_eq!(err.line, Some(1), "{err}");
    let err = refused(
        "[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [80]\nhost = [\"a.test\"]\n",
    );
    assert_eq!(err.field.as_deref(), Some("egress.trust[0].host"), "{err}");
}

#[test]
fn deny_rules_need_something_to_deny() {
    let err = refused("[[egress.deny]]\n");
    assert!(
        err.message.contains("needs `cidrs`, `hosts` or both"),
        "{err}"
    );
}

#[test]
fn errors_print_as_file_line_field_message() {
    let err = refused("[egress]\nports = [0]\n");
    assert_eq!(
        err.to_string(),
        "ops.toml:2: egress.ports: port 0 cannot be connected to"
    );
}

#[test]
fn defaults_load() {
    let c = Config::defaults().expect("defaults");
    assert_eq!(
        c.policy.ports_for(fetchgate::decide::RequestKind::Http),
        [80, 443]
    );
    assert_eq!(
        c.policy.ports_for(fetchgate::decide::RequestKind::Connect),
        [443]
    );
}

/// The shipped example configs load with the real parser (file references aside: the CA and
/// token files they name exist only on a real host).
#[test]
fn deploy_example_configs_load() {
    let example = std::fs::read_to_string("deploy/fetchgate.example.toml").unwrap();
    let without_files: String = example
        .lines()
        .filter(|l| !l.starts_with("tokens_file") && !l.starts_with("extra_roots"))
        .map(|l| format!("{l}\n"))
        .collect();
    Config::from_toml("deploy/fetchgate.example.toml", &without_files)
        .unwrap_or_else(|e| panic!("{e}"));

    // The fleet's ConfigMap names the S3 secret file the pod gets from a Secret, and the fleet
    // key its init container copies (read here from the test's own 0600 copy).
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("s3-secret"), "not-a-real-secret").unwrap();
    let key = secrets.path().join("fleet-key");
    std::fs::write(&key, "a fleet key for the test, well over thirty-two bytes").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    for file in [
        "deploy/kubernetes/configmap.yaml",
        "deploy/kubernetes/fleet/configmap.yaml",
    ] {
        let cm = std::fs::read_to_string(file).unwrap();
        let start = cm
            .find("fetchgate.toml: |")
            .expect("the ConfigMap holds fetchgate.toml")
            + "fetchgate.toml: |".len();
        let toml: String = cm[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
            .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
            .filter(|l| !l.starts_with("tokens_file") && !l.starts_with("extra_roots"))
            .map(|l| {
                if l.starts_with("fleet_key_file") {
                    "fleet_key_file = \"fleet-key\"\n".to_string()
                } else {
                    l
                }
            })
            .collect();
        Config::from_toml_in(file, &toml, secrets.path()).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn hardening_keys_are_checked_and_defaulted() {
    let limits = |t: &str| Config::from_toml("ops.toml", t).unwrap().limits;
    assert_eq!(
        limits("[proxy]\nmax_connections = 100\n").max_connections_per_client,
        25,
        "a quarter of max_connections"
    );
    assert_eq!(
        limits("[proxy]\nmax_connections = 3\n").max_connections_per_client,
        1
    );
    let err = refused("[proxy]\nmax_connections_per_client = 0\n");
    assert_eq!(
        err.field.as_deref(),
        Some("proxy.max_connections_per_client")
    );

    let err = refused("[access]\norigins = [\"https://ci.example.com/\"]\n");
    assert_eq!(err.field.as_deref(), Some("access.origins"), "{err}");
    assert!(err.message.contains("`https://ci.example.com`"), "{err}");
    let err = refused("[access]\norigins = [\"null\"]\n");
    assert_eq!(err.line, Some(2), "{err}");

    let err =
        refused("[cache]\nmax_bytes = 1000000\n\n[[cache.tee]]\nhosts = [\"*.example.com\"]\n");
    assert_eq!(err.field.as_deref(), Some("cache.tee[0].hosts"), "{err}");
    let err = refused("[[cache.tee]]\nhosts = []\n");
    assert!(err.message.contains("at least one host"), "{err}");
    let err = refused("[[cache.tee]]\nhost = [\"a.example\"]\n");
    assert_eq!(err.field.as_deref(), Some("cache.tee[0].host"), "{err}");
    let c = Config::from_toml(
        "ops.toml",
        "[[cache.tee]]\nhosts = [\"Registry.Example.COM.\", \"[::1]\"]\n",
    )
    .unwrap();
    assert_eq!(c.cache.tee.public_hosts, ["registry.example.com", "::1"]);

    // The tee's stall bound: defaulted, and refused outside 1..=60000 by name.
    let c = Config::from_toml("ops.toml", "").unwrap();
    assert_eq!(c.cache.tee.stall, std::time::Duration::from_millis(2000));
    let c = Config::from_toml(
        "ops.toml",
        "[cache]
tee_stall_ms = 500
",
    )
    .unwrap();
    assert_eq!(c.cache.tee.stall, std::time::Duration::from_millis(500));
    for bad in ["0", "60001"] {
        let err = refused(&format!(
            "[cache]
tee_stall_ms = {bad}
"
        ));
        assert_eq!(err.field.as_deref(), Some("cache.tee_stall_ms"), "{err}");
    }
}

/// The tee may hold a chunk only for less than the upstream body's idle time-out: a longer
/// hold would cut off a healthy upstream, so such a config is refused, naming the key.
#[test]
fn tee_stall_must_stay_below_the_body_idle_timeout() {
    let err = refused("[proxy]\nbody_idle_timeout_ms = 1000\n\n[cache]\ntee_stall_ms = 1000\n");
    assert_eq!(err.field.as_deref(), Some("cache.tee_stall_ms"), "{err}");
    assert!(err.message.contains("body_idle_timeout_ms"), "{err}");
    // Unset, the bound gives way to a short idle time-out.
    let c = Config::from_toml("short.toml", "[proxy]\nbody_idle_timeout_ms = 1500\n").unwrap();
    assert_eq!(c.cache.tee.stall, std::time::Duration::from_millis(750));
    Config::from_toml(
        "ok.toml",
        "[proxy]\nbody_idle_timeout_ms = 1500\n\n[cache]\ntee_stall_ms = 1000\n",
    )
    .unwrap();
}

/// `[cache] flight_hedge_ms`: defaulted to 2000, 0 allowed (never wait on another source),
/// and refused above one minute by name.
#[test]
fn flight_hedge_is_defaulted_and_bounded() {
    let c = Config::from_toml("ops.toml", "").unwrap();
    assert_eq!(
        c.cache.fetch.flight_hedge,
        std::time::Duration::from_millis(2000)
    );
    for ok in [0u64, 60_000] {
        let c =
            Config::from_toml("ops.toml", &format!("[cache]\nflight_hedge_ms = {ok}\n")).unwrap();
        assert_eq!(
            c.cache.fetch.flight_hedge,
            std::time::Duration::from_millis(ok)
        );
    }
    let err = refused("[cache]\nflight_hedge_ms = 60001\n");
    assert_eq!(err.field.as_deref(), Some("cache.flight_hedge_ms"), "{err}");
}
