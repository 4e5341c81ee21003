//! Token auth upstream: a token asked once per scope, and the credentials file sent to the token
//! realm only, never to the registry or its redirects.

use crate::support;

use support::oci::Skopeo;
use support::oci::image::{self, Image, Top};
use support::oci::registry::{DockerRegistry, Options, Storage};
use support::seaweed;

use super::{blocking, gate, gate_at, gate_trusting, token_registry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_upstream_pulls_with_a_token_asked_once_per_scope() {
    let (tokens, reg, img) =
        token_registry("fg-oci-token", &[16 * 1024], "fetchgate/private").await;
    let pushed = tokens.requests().len();

    // The twin first: the realm is an upstream like any other, so an untrusted token server
    // is never asked, and the pull fails.
    let (_p, untrusted, _d) = gate(&reg, "").await;
    let run = blocking(move || {
        let out = tempfile::tempdir().unwrap();
        Skopeo::new().pull(
            &format!("{untrusted}/fetchgate/private:v1"),
            out.path(),
            &[],
        )
    })
    .await;
    assert!(!run.ok, "pulled without a token");
    assert_eq!(
        tokens.requests().len(),
        pushed,
        "an untrusted realm was asked"
    );

    let (_proxy, mount, _dir) = gate_trusting(&reg, &[tokens.addr], "").await;
    let tokens = blocking(move || {
        let skopeo = Skopeo::new();
        let from = format!("{mount}/fetchgate/private:v1");
        let out = tempfile::tempdir().unwrap();
        let run = skopeo.pull(&from, out.path(), &[]);
        assert!(
            run.ok,
            "pull through fetchgate with a token: {}",
            run.stderr
        );
        assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        let asked: Vec<_> = tokens.requests()[pushed..].to_vec();
        assert_eq!(asked.len(), 1, "one token for the scope: {asked:?}");
        assert!(
            asked[0]
                .target
                .contains("scope=repository%3Afetchgate%2Fprivate%3Apull"),
            "{asked:?}"
        );
        assert!(asked[0].authorization.is_none(), "anonymous: {asked:?}");
        // Again by digest, with new requests upstream: the token is reused until it expires.
        let out = tempfile::tempdir().unwrap();
        let by_digest = format!("{mount}/fetchgate/private@{}", img.manifest.digest);
        assert!(skopeo.pull(&by_digest, out.path(), &[]).ok);
        assert_eq!(tokens.requests().len(), pushed + 1);
        drop(reg);
        tokens
    })
    .await;
    drop(tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_credentials_file_goes_to_the_token_realm_only_never_to_the_registry_or_its_redirects()
{
    use support::oci::relay::Relay;
    use support::oci::token::{TokenPolicy, TokenServer};
    let tokens = TokenServer::start(TokenPolicy {
        basic: Some(("robot".into(), "s3cret-token".into())),
        ..TokenPolicy::default()
    });
    // Blobs redirect (307) to pre-signed URLs of an S3 endpoint that is a recording relay.
    let weed = seaweed::shared();
    weed.create_bucket("fg-oci-creds").await;
    let s3 = Relay::start(weed.s3);
    let (auth, endpoint) = (tokens.auth(), format!("http://{}", s3.addr));
    let reg = blocking(move || {
        DockerRegistry::start(Options {
            storage: Storage::S3 {
                endpoint,
                bucket: "fg-oci-creds".into(),
                access_key: seaweed::ACCESS_KEY.into(),
                secret_key: seaweed::SECRET_KEY.into(),
            },
            auth: Some(auth),
            ..Options::default()
        })
    })
    .await;
    let img = Image::build("fg-oci-creds", "amd64", &[16 * 1024]);
    let (reg, img) = blocking(move || {
        let layout = tempfile::tempdir().unwrap();
        image::write_layout(layout.path(), "v1", Top::Image(&img));
        let creds = ["--dest-creds", "robot:s3cret-token"];
        Skopeo::new().push(layout.path(), "v1", reg.addr, "fetchgate/creds", &creds);
        (reg, img)
    })
    .await;
    let pushed = tokens.requests().len();
    let s3_pushed = s3.requests().len();
    // fetchgate reaches the registry through a recording relay too.
    let origin = Relay::start(reg.addr);
    let creds = tempfile::tempdir().unwrap();
    let file = creds.path().join("oci-credentials");
    std::fs::write(&file, "robot:s3cret-token\n").unwrap();
    let (_proxy, mount, _dir) = gate_at(
        &format!("http://{}/", origin.addr),
        &[origin.addr, tokens.addr, s3.addr],
        "private",
        &format!("credentials_file = {:?}", file.display().to_string()),
    )
    .await;
    blocking(move || {
        let out = tempfile::tempdir().unwrap();
        let run = Skopeo::new().pull(&format!("{mount}/fetchgate/creds:v1"), out.path(), &[]);
        assert!(run.ok, "pull with the credentials file: {}", run.stderr);
        assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        let basic = "Basic cm9ib3Q6czNjcmV0LXRva2Vu"; // robot:s3cret-token
        // The realm got the configured user and token, as Basic.
        let asked = tokens.requests()[pushed..].to_vec();
        assert!(!asked.is_empty(), "no token was asked for");
        for t in &asked {
            assert_eq!(t.authorization.as_deref(), Some(basic), "{asked:?}");
        }
        // The registry's origin saw only Bearer tokens, never the credential.
        let upstream = origin.requests();
        assert!(upstream.iter().any(|r| r.target.contains("/blobs/")));
        for r in &upstream {
            for a in r.all("authorization") {
                assert!(a.starts_with("Bearer "), "{} {}: {a}", r.method, r.target);
            }
        }
        // The redirect target (a pre-signed URL; the registry's own S3 calls aside) saw no
        // Authorization at all.
        let redirected: Vec<_> = s3.requests()[s3_pushed..]
            .iter()
            .filter(|r| r.target.contains("X-Amz-Signature="))
            .cloned()
            .collect();
        assert!(!redirected.is_empty(), "no blob was redirected");
        for r in &redirected {
            assert!(
                r.all("authorization").is_empty(),
                "{} {}",
                r.method,
                r.target
            );
        }
        drop(reg);
    })
    .await;
}
