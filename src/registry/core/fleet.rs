//! Registry metadata fetched once per TTL for the whole fleet: before a leading request asks
//! the upstream, it reads the document another instance shared through the bucket (sealed
//! with the fleet key, [`crate::shared::fleet_meta`]), and uses it while it is fresh by the
//! time that instance fetched it. When there is none, or it is stale, one instance takes the
//! document's lease and asks the upstream (revalidating with the ETag it has), shares what it
//! got, and the others wait for it. Every document, shared or fetched, passes the kind's own
//! check (apt's signatures, ...) before the cache keeps it, since bucket bytes are untrusted;
//! any bucket failure means asking the upstream as a lone instance would.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::fetch::failure::LocatorFailure;
use crate::registry::metadata::Answer;
use crate::shared::SharedTier;
use crate::shared::fleet::DocRead;
use crate::shared::fleet_meta::SharedDoc;
use crate::shared::lease::Turn;
use crate::store::now;

/// `answer`, its body (when it has one) judged by `check`.
async fn checked<C, CFut>(answer: Answer, check: C) -> Result<Answer, LocatorFailure>
where
    C: FnOnce(Bytes) -> CFut,
    CFut: Future<Output = Result<Bytes, LocatorFailure>>,
{
    match answer {
        Answer::Fresh {
            etag,
            content_type,
            body,
            fetched,
        } => Ok(Answer::Fresh {
            etag,
            content_type,
            body: check(body).await?,
            fetched,
        }),
        other => Ok(other),
    }
}

/// The answer a shared document gives: fetched when its instance fetched it.
fn from_doc(doc: SharedDoc) -> Answer {
    Answer::Fresh {
        etag: doc.etag,
        content_type: doc.content_type,
        body: doc.body,
        fetched: Some(doc.fetched),
    }
}

/// True while `doc` is within `ttl` of when it was fetched (by this clock).
fn fresh(doc: &SharedDoc, ttl: Duration) -> bool {
    doc.fetched.saturating_add(ttl.as_secs()) > now()
}

/// The answer for the metadata cached under `key` whose TTL is `ttl`: the fleet's document
/// when a fresh one is shared, else the upstream's through `ask` (given the local `etag`),
/// asked by one instance of the fleet at a time. `check` judges whichever body it is.
pub(crate) async fn answer<A, AFut, C, CFut>(
    tier: Option<&SharedTier>,
    key: &str,
    ttl: Duration,
    etag: Option<String>,
    ask: A,
    check: C,
) -> Result<Answer, LocatorFailure>
where
    A: FnOnce(Option<String>) -> AFut,
    AFut: Future<Output = Result<Answer, LocatorFailure>>,
    C: FnOnce(Bytes) -> CFut,
    CFut: Future<Output = Result<Bytes, LocatorFailure>>,
{
    let Some(tier) = tier.filter(|t| t.shares_metadata()) else {
        return checked(ask(etag).await?, check).await;
    };
    let (shared, seen) = match tier.doc(key).await {
        DocRead::Found(doc, _) if fresh(&doc, ttl) => {
            tier.count_metadata("fleet");
            return checked(from_doc(doc), check).await;
        }
        DocRead::Found(doc, object_etag) => (Some(doc), Some(object_etag)),
        DocRead::Missing(object_etag) => (None, object_etag),
        DocRead::Unavailable => {
            tier.count_metadata("upstream");
            return checked(ask(etag).await?, check).await;
        }
    };
    let landed = tier.doc_landed(key, seen);
    let guard = match tier.lease(&SharedTier::doc_lease(key), key, &landed).await {
        // The document was shared again while this request waited: the holder's answer,
        // however close to its TTL by whole seconds.
        Turn::Ready => {
            if let DocRead::Found(doc, _) = tier.doc(key).await {
                tier.count_metadata("fleet");
                return checked(from_doc(doc), check).await;
            }
            None
        }
        Turn::Lead(guard) => Some(guard),
        Turn::Alone(_) => None,
    };
    tier.count_metadata("upstream");
    let answer = ask(etag.clone()).await;
    let answer = match answer {
        Ok(a) => checked(a, check).await,
        Err(e) => Err(e),
    };
    if guard.is_some() {
        match &answer {
            Ok(Answer::Fresh {
                etag,
                content_type,
                body,
                ..
            }) => {
                let doc = SharedDoc {
                    fetched: now(),
                    etag: etag.clone(),
                    content_type: content_type.clone(),
                    body: body.clone(),
                };
                tier.share_doc(key, &doc).await;
            }
            // The upstream confirmed the copy this instance had: when it is the shared one,
            // it is shared again as confirmed now.
            Ok(Answer::NotModified) => {
                if let Some(doc) = shared
                    && doc.etag.is_some()
                    && doc.etag == etag
                {
                    let doc = SharedDoc {
                        fetched: now(),
                        ..doc
                    };
                    tier.share_doc(key, &doc).await;
                }
            }
            _ => {}
        }
    }
    if let Some(guard) = guard {
        guard.release().await;
    }
    answer
}
