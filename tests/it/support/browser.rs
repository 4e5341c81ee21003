//! A real browser for the pages fetchgate serves: Debian's headless Chromium, kept from
//! reaching anything but loopback. Without `chromium` a test that needs it fails, naming the
//! package and scripts/test (which installs it).

use std::time::Duration;

/// The page as Chromium's DOM after loading it, and what Chromium logged (console
/// messages, including any Content-Security-Policy violation).
pub async fn chromium_dom(url: &str) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--disable-domain-reliability",
                "--no-pings",
                "--dns-prefetch-disable",
                // Nothing but the loopback page can be reached, whatever Chromium would try.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--enable-logging=stderr",
                "--v=0",
                &format!("--user-data-dir={}", profile.path().display()),
                "--dump-dom",
                url,
            ])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finished within two minutes")
    .expect("run chromium: run scripts/test, which installs Debian's chromium (apt-get install -y chromium)");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
