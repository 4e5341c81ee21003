//! The real `apt-get`, with every `Dir::*` under a temp dir, and what it installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

use super::{APP, AptRepo, COMPONENT, DEP, SUITE, require_tools};

/// The real `apt-get`, with every `Dir::*` under a temp dir and nothing of the machine's own
/// apt state read or written.
pub struct AptClient {
    dir: TempDir,
    proxy: Option<String>,
    /// `Acquire::https::Proxy` and `Acquire::https::CaInfo`, when set.
    https: Option<(String, PathBuf)>,
}

impl AptClient {
    /// A client whose only source is `deb [signed-by=<keyring>] <base_url> stable main`.
    pub fn new(base_url: &str, keyring: &Path) -> Self {
        require_tools();
        let dir = tempfile::tempdir().unwrap();
        for d in [
            "etc/apt/sources.list.d",
            "etc/apt/trusted.gpg.d",
            "etc/apt/preferences.d",
            "etc/apt/apt.conf.d",
            "state/lists/partial",
            "cache/archives/partial",
            "log",
            "download",
        ] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            dir.path().join("etc/apt/sources.list"),
            format!(
                "deb [signed-by={}] {base_url} {SUITE} {COMPONENT}\n",
                keyring.display()
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("state/status"), "").unwrap();
        std::fs::write(dir.path().join("etc/apt/apt.conf"), "").unwrap();
        // APT_CONFIG is read before the parts directory, so it can point the parts and the
        // main file away from /etc/apt: this machine's apt.conf.d (which may turn off
        // Check-Valid-Until, or run hooks on update) is never read.
        let d = dir.path().display();
        std::fs::write(
            dir.path().join("apt-config"),
            format!("Dir \"{d}/\";\nDir::Etc \"{d}/etc/apt/\";\nDir::Etc::parts \"{d}/etc/apt/apt.conf.d/\";\nDir::Etc::main \"{d}/etc/apt/apt.conf\";\n"),
        )
        .unwrap();
        Self {
            dir,
            proxy: None,
            https: None,
        }
    }

    /// Sends every request through the HTTP proxy at `proxy` (`http://127.0.0.1:PORT/`),
    /// as `Acquire::http::Proxy` does; without it apt connects directly.
    pub fn with_proxy(mut self, proxy: &str) -> Self {
        self.proxy = Some(proxy.to_string());
        self
    }

    /// Sends every `https://` request through the HTTP proxy at `proxy` (a CONNECT), as
    /// `Acquire::https::Proxy` does, trusting only the CA certificates in `ca`
    /// (`Acquire::https::CaInfo`).
    pub fn with_https_proxy(mut self, proxy: &str, ca: &Path) -> Self {
        self.https = Some((proxy.to_string(), ca.to_path_buf()));
        self
    }

    /// Points the one source at `suite` instead of [`SUITE`] (same base, keyring, component).
    pub fn use_suite(&self, suite: &str) {
        let path = self.dir.path().join("etc/apt/sources.list");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replace(
            &format!(" {SUITE} {COMPONENT}"),
            &format!(" {suite} {COMPONENT}"),
        );
        std::fs::write(path, text).unwrap();
    }

    /// Where `apt-get download` writes, and `install --download-only` caches.
    pub fn download_dir(&self) -> PathBuf {
        self.dir.path().join("download")
    }

    /// The archives cache of `install --download-only`.
    pub fn archives_dir(&self) -> PathBuf {
        self.dir.path().join("cache/archives")
    }

    /// Runs `apt-get <args>` with every directory under the temp dir.
    pub fn apt_get(&self, args: &[&str]) -> Output {
        let d = self.dir.path();
        let o = |k: &str, v: &Path| format!("{k}={}", v.display());
        let mut c = Command::new("apt-get");
        c.env("APT_CONFIG", d.join("apt-config"))
            .env_remove("http_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("https_proxy")
            .env_remove("all_proxy")
            .current_dir(self.download_dir());
        for opt in [
            o("Dir", d),
            o("Dir::Etc", &d.join("etc/apt")),
            o("Dir::State", &d.join("state")),
            o("Dir::State::status", &d.join("state/status")),
            o("Dir::Cache", &d.join("cache")),
            o("Dir::Log", &d.join("log")),
            o("Dir::Etc::sourcelist", &d.join("etc/apt/sources.list")),
            "Dir::Etc::sourceparts=-".to_string(),
            o("Dir::Etc::trusted", &d.join("etc/apt/trusted.gpg")),
            o("Dir::Etc::trustedparts", &d.join("etc/apt/trusted.gpg.d")),
            o(
                "Dir::Etc::preferencesparts",
                &d.join("etc/apt/preferences.d"),
            ),
            o("Dir::Etc::parts", &d.join("etc/apt/apt.conf.d")),
            "Debug::NoLocking=1".to_string(),
            "APT::Sandbox::User=root".to_string(),
            format!(
                "Acquire::http::Proxy={}",
                self.proxy.as_deref().unwrap_or("DIRECT")
            ),
            "Acquire::Languages=none".to_string(),
            "Acquire::Retries=0".to_string(),
        ] {
            c.args(["-o", &opt]);
        }
        if let Some((proxy, ca)) = &self.https {
            c.args(["-o", &format!("Acquire::https::Proxy={proxy}")]);
            c.args(["-o", &o("Acquire::https::CaInfo", ca)]);
        }
        c.args(["-q", "-y"]).args(args);
        c.output()
            .unwrap_or_else(|e| panic!("cannot run apt-get: {e}"))
    }

    /// `apt-get update`.
    pub fn update(&self) -> Output {
        self.apt_get(&["update"])
    }

    /// `apt-get install --download-only <pkg>` (resolves dependencies against the empty
    /// temp dpkg status).
    pub fn install_download_only(&self, pkg: &str) -> Output {
        self.apt_get(&["install", "--download-only", "--no-install-recommends", pkg])
    }

    /// `apt-get download <pkgs>` into [`AptClient::download_dir`].
    pub fn download(&self, pkgs: &[&str]) -> Output {
        let mut args = vec!["download"];
        args.extend_from_slice(pkgs);
        self.apt_get(&args)
    }
}

/// `apt-get update` and `install --download-only` of [`APP`] succeed, and both it and its
/// dependency arrive exactly as built.
pub fn installs(apt: &AptClient, repo: &AptRepo) {
    let up = apt.update();
    assert!(up.status.success(), "{}", output_text(&up));
    let got = apt.install_download_only(APP);
    assert!(got.status.success(), "{}", output_text(&got));
    for name in [APP, DEP] {
        let cached = apt.archives_dir().join(format!("{name}_1.0_all.deb"));
        assert_eq!(
            std::fs::read(&cached).ok(),
            std::fs::read(repo.root.join(AptRepo::deb_path(name))).ok(),
            "{name}: {}",
            output_text(&got)
        );
    }
}

/// stdout and stderr of an apt run, for assertion messages.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
