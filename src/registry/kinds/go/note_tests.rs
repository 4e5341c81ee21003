//! Signed notes against the vectors `golang.org/x/mod/sumdb/note` documents, and each way a
//! note is refused.

use super::*;

/// The documented example key (note.go's package documentation).
const PETER_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
/// Its private key's base64 (algorithm byte then seed), from the same documentation.
const PETER_SKEY64: &str = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
/// The documented text.
const TEXT: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
/// The documented signed note.
const SIGNED: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

/// The documented signer.
fn peter() -> Signer {
    let raw = STANDARD.decode(PETER_SKEY64).unwrap();
    Signer::from_seed("PeterNeumann", raw[1..].try_into().unwrap())
}

#[test]
fn the_documented_note_verifies() {
    let v = Verifier::parse(PETER_VKEY).unwrap();
    assert_eq!((v.name.as_str(), v.hash), ("PeterNeumann", 0xc74f20a3));
    assert_eq!(open(SIGNED.as_bytes(), &v).unwrap().text, TEXT);
}

#[test]
fn the_test_signer_reproduces_the_documented_key_and_signature() {
    let s = peter();
    assert_eq!(s.verifier_key(), PETER_VKEY);
    assert_eq!(s.sign(TEXT), SIGNED);
}

#[test]
fn gos_default_database_key_parses() {
    let v = Verifier::parse("sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8")
        .unwrap();
    assert_eq!((v.name.as_str(), v.hash), ("sum.golang.org", 0x033de0ae));
}

#[test]
fn bad_keys_are_refused() {
    for bad in [
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", // wrong hash
        "PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  // 7 digits
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==", // length
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", // algorithm
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3",
        "PeterNeumann+c74f20a3+!!!",
    ] {
        assert_eq!(
            Verifier::parse(bad).unwrap_err().code(),
            "go_sumdb_key_invalid",
            "{bad}"
        );
    }
}

#[test]
fn a_changed_text_fails_the_signature() {
    let v = Verifier::parse(PETER_VKEY).unwrap();
    let altered = SIGNED.replacen("cryptography", "cryptografy!", 1);
    assert_eq!(
        open(altered.as_bytes(), &v).unwrap_err().code(),
        "go_note_bad_signature"
    );
}

#[test]
fn a_note_signed_only_by_another_key_is_unsigned() {
    let v = Verifier::parse(PETER_VKEY).unwrap();
    let other = Signer::from_seed("PeterNeumann", [7; 32]).sign(TEXT);
    assert_eq!(
        open(other.as_bytes(), &v).unwrap_err().code(),
        "go_note_unsigned"
    );
    let stranger = Signer::from_seed("EnochRoot", [7; 32]).sign(TEXT);
    assert_eq!(
        open(stranger.as_bytes(), &v).unwrap_err().code(),
        "go_note_unsigned"
    );
    // A second signature by someone else does not stop ours from counting.
    let both = format!(
        "{SIGNED}{}",
        Signer::from_seed("EnochRoot", [7; 32]).signature_line(TEXT)
    );
    assert_eq!(open(both.as_bytes(), &v).unwrap().text, TEXT);
}

/// The note that opened last opens again without its signature checked, but only for the very
/// same bytes under the very same key: a flipped byte in the text or the signature, and the
/// same bytes under another key of the same name, are refused as before.
#[test]
fn a_note_opened_again_is_the_same_note_and_only_its_exact_bytes_skip_the_check() {
    let v = Verifier::parse(PETER_VKEY).unwrap();
    for _ in 0..3 {
        assert_eq!(open(SIGNED.as_bytes(), &v).unwrap().text, TEXT);
    }
    let mut sig_flipped = SIGNED.as_bytes().to_vec();
    let at = SIGNED.rfind('=').unwrap() - 3;
    sig_flipped[at] = if sig_flipped[at] == b'A' { b'B' } else { b'A' };
    assert_eq!(
        open(&sig_flipped, &v).unwrap_err().code(),
        "go_note_bad_signature"
    );
    assert_eq!(open(SIGNED.as_bytes(), &v).unwrap().text, TEXT);
    let altered = SIGNED.replacen("answer", "Answer", 1);
    assert_eq!(
        open(altered.as_bytes(), &v).unwrap_err().code(),
        "go_note_bad_signature"
    );
    // Another key under the same name: its own check, which fails.
    let impostor = Signer::from_seed("PeterNeumann", [9; 32]);
    let other = Verifier::parse(&impostor.verifier_key()).unwrap();
    assert_eq!(open(SIGNED.as_bytes(), &v).unwrap().text, TEXT);
    assert_eq!(
        open(SIGNED.as_bytes(), &other).unwrap_err().code(),
        "go_note_unsigned"
    );
}

#[test]
fn malformed_notes_are_refused() {
    let v = Verifier::parse(PETER_VKEY).unwrap();
    let sig_line = SIGNED.split("\n\n").nth(1).unwrap();
    for bad in [
        TEXT.to_string(),                                // no signatures
        SIGNED.trim_end().to_string(),                   // no final newline
        SIGNED.replace('\u{2014}', "-"),                 // not an em dash
        SIGNED.replace("x08go", "x08g\u{1}"),            // control character
        format!("{TEXT}\n\u{2014} PeterNeumann AAAA\n"), // too short
        format!("{TEXT}\n\u{2014} PeterNeumann\n"),      // no signature
        format!("{TEXT}\n{}", sig_line.repeat(101)),     // too many
    ] {
        assert_eq!(
            open(bad.as_bytes(), &v).unwrap_err().code(),
            "go_note_malformed",
            "{bad:?}"
        );
    }
    assert_eq!(
        open(b"\xff\n\n", &v).unwrap_err().code(),
        "go_note_malformed"
    );
}
