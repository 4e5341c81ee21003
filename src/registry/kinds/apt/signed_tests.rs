//! Tests for `signed.rs`, against fixtures made by gpg (`testdata/make.sh`).

use super::*;

const KEYRING: &[u8] = include_bytes!("testdata/keyring.gpg");
const BODY: &str = include_str!("testdata/body.txt");

fn keyring() -> Keyring {
    Keyring::from_bytes(KEYRING).unwrap()
}

fn inrelease(text: &str) -> Result<Verified, AptError> {
    verify_inrelease(
        text.as_bytes(),
        &keyring(),
        SystemTime::now(),
        "dists/stable/InRelease",
    )
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/src/registry/kinds/apt/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn rsa_and_ed25519_inrelease_verify_and_return_the_unescaped_body() {
    for name in ["rsa.InRelease", "ed.InRelease"] {
        let v = inrelease(&fixture(name)).unwrap();
        assert_eq!(String::from_utf8(v.signed).unwrap(), BODY, "{name}");
    }
    assert!(
        fixture("ed.InRelease").contains("\n- - dash line"),
        "the fixture is dash-escaped"
    );
}

#[test]
fn a_key_not_in_the_keyring_is_refused() {
    let e = inrelease(&fixture("foreign.InRelease")).unwrap_err();
    assert_eq!(e.code(), "apt_key_not_trusted", "{e}");
    assert_eq!(e.field, "dists/stable/InRelease");
}

#[test]
fn one_good_signature_among_foreign_ones_is_accepted_as_apt_does() {
    let v = inrelease(&fixture("two.InRelease")).unwrap();
    assert_eq!(
        v.signer,
        keyring().fingerprints()[1],
        "the ed25519 key (exported second)"
    );
}

#[test]
fn expired_and_revoked_keys_are_refused() {
    assert_eq!(
        inrelease(&fixture("expired.InRelease")).unwrap_err().code(),
        "apt_key_expired"
    );
    assert_eq!(
        inrelease(&fixture("revoked.InRelease")).unwrap_err().code(),
        "apt_key_revoked"
    );
}

#[test]
fn a_body_changed_after_signing_is_refused() {
    let text = fixture("ed.InRelease").replace("Suite: stable", "Suite: stablf");
    let e = inrelease(&text).unwrap_err();
    assert_eq!(e.code(), "apt_signature_invalid", "{e}");
    assert!(e.detail.contains("changed after signing"), "{e}");
}

#[test]
fn undoing_a_dash_escape_by_hand_is_a_changed_body() {
    // The signed line is "- dash line"; dropping its escape makes the line "dash line".
    let text = fixture("ed.InRelease").replace("\n- - dash line", "\n- dash line");
    assert_eq!(
        inrelease(&text).unwrap_err().code(),
        "apt_signature_invalid"
    );
}

#[test]
fn text_before_or_after_the_signed_part_is_refused() {
    let good = fixture("ed.InRelease");
    for text in [
        format!("Suite: evil\n{good}"),
        format!("{good}Suite: evil\n"),
        format!("{good}{good}"),
    ] {
        assert_eq!(
            inrelease(&text).unwrap_err().code(),
            "apt_signature_invalid"
        );
    }
}

#[test]
fn detached_signatures_verify_binary_and_armoured() {
    let k = keyring();
    let now = SystemTime::now();
    let sig = std::fs::read(format!(
        "{}/src/registry/kinds/apt/testdata/rsa.Release.gpg",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let v = verify_detached(BODY.as_bytes(), &sig, &k, now, "Release").unwrap();
    assert_eq!(v.signed, BODY.as_bytes());
    let asc = fixture("ed.Release.gpg.asc");
    assert!(verify_detached(BODY.as_bytes(), asc.as_bytes(), &k, now, "Release").is_ok());
    let changed = BODY.replace("stable", "stablf");
    let e = verify_detached(changed.as_bytes(), &sig, &k, now, "Release").unwrap_err();
    assert_eq!(e.code(), "apt_signature_invalid");
    let e = verify_detached(BODY.as_bytes(), b"junk", &k, now, "Release").unwrap_err();
    assert_eq!(e.code(), "apt_signature_invalid");
}

#[test]
fn an_armoured_keyring_verifies_too() {
    let asc = Keyring::from_bytes(include_bytes!("testdata/keyring.asc")).unwrap();
    let v = verify_inrelease(
        fixture("rsa.InRelease").as_bytes(),
        &asc,
        SystemTime::now(),
        "x",
    );
    assert_eq!(
        v.unwrap().signer,
        asc.fingerprints()[0],
        "the RSA key (exported first)"
    );
}

#[test]
fn a_signing_subkey_verifies_and_is_named() {
    let v = inrelease(&fixture("sub.InRelease")).unwrap();
    assert!(
        !keyring().fingerprints().contains(&v.signer),
        "the subkey signed, not the primary"
    );
}

#[test]
fn a_signature_over_a_weak_digest_is_refused_as_apt_refuses_it() {
    let e = inrelease(&fixture("sha1.InRelease")).unwrap_err();
    assert_eq!(e.code(), "apt_signature_invalid", "{e}");
    assert!(e.detail.contains("weak digest"), "{e}");
}

#[test]
fn a_signature_over_a_digest_the_hash_header_does_not_name_is_refused_as_gpgv_refuses_it() {
    // rsa.InRelease is signed with SHA-512 and says so; gpgv checked each spelling below.
    let signed = fixture("rsa.InRelease");
    assert!(signed.contains("\nHash: SHA512\n"), "the fixture's header");
    // No header at all means MD5 to gpg.
    for header in [
        "Hash: SHA256\n",
        "Hash: sha512\n",
        "Hash: FOO, SHA512\n",
        "",
    ] {
        let text = signed.replace("Hash: SHA512\n", header);
        let e = inrelease(&text).unwrap_err();
        assert_eq!(e.code(), "apt_signature_invalid", "{header:?}: {e}");
    }
    // The twin: every header gpgv accepts still verifies.
    // (gpgv also takes `SHA256, SHA512`; the OpenPGP parser refuses the space, which is safe.)
    for header in [
        "Hash: SHA512",
        "Hash: SHA256,SHA512",
        "Hash: SHA512\nHash: SHA256",
    ] {
        let text = signed.replace("Hash: SHA512\n", &format!("{header}\n"));
        assert!(inrelease(&text).is_ok(), "{header:?}");
    }
    assert!(
        inrelease(&fixture("ed.InRelease")).is_ok(),
        "Hash: SHA256 over SHA-256"
    );
}
