//! Registry pull-through with the real clients: npm, pip and cargo install through fetchgate
//! from upstream registries the tests serve on loopback.

mod support;

use support::registry::{FakeRegistry, Workspace, npm, npm_tarball, publish_npm, shown};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_fixtures_install_straight_from_the_upstream() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    publish_npm(
        &reg,
        "@fg/app",
        &[(
            "1.0.0",
            vec![("fg-util", "^1.0.0")],
            npm_tarball("@fg/app", "1.0.0", &[("fg-util", "^1.0.0")]),
        )],
    );
    let ws = Workspace::new();
    ws.write(
        "proj/package.json",
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    );
    let proj = ws.path().join("proj");
    let out = npm(
        &proj,
        &ws.path().join("home"),
        &["install", "@fg/app", "--registry", &reg.base()],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert!(proj.join("node_modules/fg-util/index.js").exists());
    println!("{:?}", reg.requests());
}
