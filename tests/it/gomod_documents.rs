//! `kind = "go"` metadata documents are read before they are kept (issue 33, item 10): a
//! `.info` whose `Version` is not the version asked for, and an `@v/list` with a line that
//! is no canonical semantic version, are refused (`424 go_metadata_invalid`, naming the
//! field) rather than passed through, while the honest documents are served as they were.

use crate::gomod::{fetch, gate, world};

const INFO: &str = "/example.com/!upper/lib/@v/v1.0.0.info";
const LIST: &str = "/example.com/!upper/lib/@v/list";
const LATEST: &str = "/example.com/!upper/lib/@latest";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_info_naming_another_version_and_a_list_with_a_non_version_line_are_refused() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "metadata_ttl_seconds = 0").await;
    // The twin first: the honest documents, exactly as the upstream served them.
    for path in [INFO, LIST, LATEST] {
        let got = fetch(proxy, path).await;
        assert_eq!(got.status, 200, "{path}: {:?}", got.body);
        assert_eq!(Some(got.body.clone()), w.proxy_body(path), "{path}");
    }
    // An upstream that answers v1.0.0's .info with an older version, a list with a line
    // that is not a version, and an @latest that names none.
    w.serve_proxy(
        INFO,
        "{\"Version\":\"v0.9.0\",\"Time\":\"2025-01-01T00:00:00Z\"}",
    );
    w.serve_proxy(LIST, "v1.0.0\nmaster\n");
    w.serve_proxy(LATEST, "{\"Version\":\"latest\"}");
    let (fresh, _dir2) = gate(&w, "").await;
    for (path, field) in [(INFO, "Version"), (LIST, "list"), (LATEST, "Version")] {
        let got = fetch(fresh, path).await;
        assert_eq!(got.status, 424, "{path}: {:?}", got.body);
        assert_eq!(got.code(), "go_metadata_invalid", "{path}");
        assert_eq!(got.json()["field"], field, "{path}");
        assert!(got.json()["next"].is_string(), "{path}");
    }
    // The one that verified them before keeps serving its verified copies (stale), never
    // the refused ones.
    for path in [INFO, LIST] {
        let got = fetch(proxy, path).await;
        assert_eq!(got.status, 200, "{path}: {:?}", got.body);
        assert_ne!(Some(got.body.clone()), w.proxy_body(path), "{path}");
    }
}
