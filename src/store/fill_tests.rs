//! Tests of a fill whose caller hashes the bytes: it publishes only on the caller's matching
//! digest and the exact size, never on its word alone.

use super::super::testing::{bytes, store};
use super::*;

/// A fill of `body`'s size expecting `body`'s digest, hashed by its caller, with `written`
/// written into it.
fn caller_hashed(s: &Arc<Store>, body: &[u8], written: &[u8]) -> Fill {
    let mut fill = s
        .begin(Some(Digest::of(body)), body.len() as u64)
        .expect("begin");
    fill.hashed_by_caller().expect("before the first byte");
    fill.write(written).expect("write");
    fill
}

#[test]
fn a_fill_hashed_by_its_caller_publishes_on_the_matching_digest() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 1);
    let mut fill = caller_hashed(&s, &body, &body);
    assert_eq!(fill.verify_hashed(Digest::of(&body)), Ok(Digest::of(&body)));
    assert_eq!(fill.commit(None, None), Ok(Digest::of(&body)));
    assert!(s.contains_verified(&Digest::of(&body)));
}

#[test]
fn a_fill_hashed_by_its_caller_refuses_a_wrong_digest_a_wrong_size_or_none() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 2);
    let expected = Digest::of(&body);
    // The caller's hash of other bytes: refused, and the fill stays refused.
    let mut wrong = body.clone();
    wrong[0] ^= 1;
    let mut fill = caller_hashed(&s, &body, &wrong);
    assert!(matches!(
        fill.verify_hashed(Digest::of(&wrong)),
        Err(FillError::DigestMismatch { .. })
    ));
    assert!(
        fill.verify_hashed(expected).is_err(),
        "the first answer holds"
    );
    assert!(fill.commit(None, None).is_err());
    // The right digest claimed over too few bytes: the fill's own count refuses it.
    let mut fill = caller_hashed(&s, &body, &body[..4000]);
    assert!(matches!(
        fill.verify_hashed(expected),
        Err(FillError::TooShort { got: 4000, .. })
    ));
    // Never told what the bytes hash to: no publication.
    let fill = caller_hashed(&s, &body, &body);
    assert!(fill.commit(None, None).is_err());
    assert!(!s.contains_verified(&expected));
}

#[test]
fn a_fill_that_hashes_for_itself_ignores_a_caller_s_digest() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 3);
    let mut other = body.clone();
    other[9] ^= 1;
    // Other bytes written to a fill that hashes them itself: a caller's claim does not help.
    let mut fill = s
        .begin(Some(Digest::of(&body)), body.len() as u64)
        .expect("begin");
    fill.write(&other).expect("write");
    assert!(fill.verify_hashed(Digest::of(&body)).is_err());
    // And the caller's hashing cannot be asked for once bytes were written.
    let mut fill = s
        .begin(Some(Digest::of(&body)), body.len() as u64)
        .expect("begin");
    fill.write(&body[..10]).expect("write");
    assert!(fill.hashed_by_caller().is_err());
}
