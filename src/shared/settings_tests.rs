//! Unit tests of the `[shared]` table: a full table, the endpoint only the config names, and
//! mistakes that name the field and the next step.

use super::*;

fn check(text: &str, env: &[(&str, &str)]) -> Result<Option<SharedSettings>, FileError> {
    #[derive(Deserialize)]
    struct File {
        shared: Option<SharedSection>,
    }
    let src = TomlSource::new("t.toml", text);
    let file: File = src.parse()?;
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    SharedSettings::from_section(file.shared.as_ref(), Path::new("."), &src, &lookup)
}

const KEYS: &[(&str, &str)] = &[("AWS_ACCESS_KEY_ID", "id"), ("AWS_SECRET_ACCESS_KEY", "s")];

#[test]
fn a_full_table_is_read_and_the_environment_supplies_the_keys() {
    let s = check(
        "[shared]\nurl = \"s3://fleet-cache/ci/x\"\nendpoint = \"http://127.0.0.1:8333\"\nallow_http = true\ntimeout_ms = 250\nupload_queue = 3\n",
        KEYS,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (s.bucket.as_str(), s.prefix.as_str()),
        ("fleet-cache", "ci/x")
    );
    assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:8333"));
    assert_eq!(s.timeout, Duration::from_millis(250));
    assert_eq!(s.upload_queue, 3);
    assert_eq!(s.credentials.access_key_id, "id");
    assert!(
        !format!("{s:?}").contains("\"s\""),
        "the secret never shows"
    );
    assert!(check("", KEYS).unwrap().is_none());
}

#[test]
fn only_the_config_names_the_endpoint() {
    let env = [
        ("AWS_ACCESS_KEY_ID", "id"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
        ("AWS_ENDPOINT", "http://169.254.169.254"),
        ("AWS_ENDPOINT_URL", "http://169.254.169.254"),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let s = check("[shared]\nurl = \"s3://bucket\"\n", &env)
        .unwrap()
        .unwrap();
    assert_eq!(
        s.endpoint, None,
        "AWS S3 itself, not the environment's endpoint"
    );
    assert!(!s.allow_http);
    let s = check(
        "[shared]\nurl = \"s3://bucket\"\nendpoint = \"https://s3.corp.example\"\n",
        &env,
    )
    .unwrap()
    .unwrap();
    assert_eq!(s.endpoint.as_deref(), Some("https://s3.corp.example"));
}

#[test]
fn mistakes_name_the_field_and_the_next_step() {
    let cases: &[(&str, &str, &str)] = &[
        ("[shared]\n", "shared.url", "s3://bucket/prefix"),
        ("[shared]\nurl = \"https://b/p\"\n", "shared.url", "s3://"),
        (
            "[shared]\nurl = \"s3://B_/p\"\n",
            "shared.url",
            "bucket name",
        ),
        (
            "[shared]\nurl = \"s3://bucket/a//b\"\n",
            "shared.url",
            "prefix",
        ),
        (
            "[shared]\nurl = \"s3://bucket\"\nendpoint = \"http://127.0.0.1:1\"\n",
            "shared.endpoint",
            "allow_http = true",
        ),
        (
            "[shared]\nurl = \"s3://bucket\"\nendpoint = \"https://u:p@h\"\n",
            "shared.endpoint",
            "secret_access_key_file",
        ),
        (
            "[shared]\nurl = \"s3://bucket\"\nca_file = \"/nonexistent/ca.pem\"\n",
            "shared.ca_file",
            "PEM file of the store's CA",
        ),
        (
            "[shared]\nurl = \"s3://bucket\"\ntimeout_ms = 0\n",
            "shared.timeout_ms",
            "at least 1",
        ),
        (
            "[shared]\nurl = \"s3://bucket\"\nbucket = \"x\"\n",
            "shared.bucket",
            "unknown field",
        ),
    ];
    for (text, field, hint) in cases {
        let e = check(text, KEYS).unwrap_err();
        assert_eq!(e.field.as_deref(), Some(*field), "{text}: {e:?}");
        assert!(e.message.contains(hint), "{text}: {}", e.message);
    }
    let e = check("[shared]\nurl = \"s3://bucket\"\n", &[]).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("shared.access_key_id"));
    assert!(e.message.contains("AWS_ACCESS_KEY_ID"), "{}", e.message);
}

#[test]
fn value_refusals_say_what_to_write() {
    assert_eq!(
        bucket_and_prefix("https://b/p").unwrap_err().to_string(),
        "`https://b/p` is not an s3:// URL; write it as s3://bucket/prefix"
    );
    assert_eq!(
        endpoint("ftp://h", false).unwrap_err().to_string(),
        "the scheme `ftp` is not http or https"
    );
    let e = ca_pem(Path::new("/nonexistent/ca.pem"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot read /nonexistent/ca.pem: ")
            && e.ends_with("; point ca_file at the PEM file of the store's CA"),
        "{e}"
    );
}
