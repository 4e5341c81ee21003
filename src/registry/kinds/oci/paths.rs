//! Request paths of the distribution API's pull side, read into routes.
//!
//! Served: `GET`/`HEAD` on `/v2/`, `/v2/<name>/manifests/<tag|digest>`,
//! `/v2/<name>/blobs/<digest>` and `/v2/<name>/tags/list` (with `n` and `last`). Refused:
//! uploads and mounts (`/v2/<name>/blobs/uploads/...`) and any method that writes, with `405`;
//! `_catalog`, `referrers` and anything else with `404`. Names hold slashes (and may hold a
//! component called `manifests` or `blobs`), so a path is read from the right. The caller
//! strips a `/registry/<name>` prefix first; containerd's `ns` query parameter is kept as text
//! for choosing among configured registries and is never a dial target.

use super::error::OciError;
use super::reference::{Digest, Reference, RepositoryName, Tag};

/// The longest `ns` value kept (a host name and port).
const MAX_NS_LEN: usize = 261;

/// What a pull asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/v2/`: the API version check.
    Base,
    /// A manifest or index, by tag or digest.
    Manifest {
        /// The repository.
        name: RepositoryName,
        /// The tag or digest.
        reference: Reference,
    },
    /// A blob (layer or config), by digest.
    Blob {
        /// The repository.
        name: RepositoryName,
        /// The digest.
        digest: Digest,
    },
    /// The repository's tags, one page.
    TagsList {
        /// The repository.
        name: RepositoryName,
        /// `n`: at most this many tags.
        n: Option<u32>,
        /// `last`: tags after this one.
        last: Option<Tag>,
    },
}

/// A parsed pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PullRequest {
    /// What it asks for.
    pub(crate) route: Route,
    /// `HEAD` rather than `GET`.
    pub(crate) head: bool,
    /// containerd's `ns=<registry host>`, as text.
    pub(crate) ns: Option<String>,
}

/// Reads `method path?query` (the path starting at `/v2`).
pub(crate) fn parse(
    method: &str,
    path: &str,
    query: Option<&str>,
) -> Result<PullRequest, OciError> {
    let read_only = || OciError::ReadOnly {
        method: method.chars().take(16).collect(),
        path: path.chars().take(512).collect(),
    };
    let not_served = || OciError::NotServed(path.chars().take(512).collect());
    let rest = match path.strip_prefix("/v2") {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => return Err(not_served()),
    };
    // Any write under /v2 is refused as one, whatever its path holds.
    let head = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err(read_only()),
    };
    let route = match rest {
        "" => Route::Base,
        _ => route(rest, query, read_only, not_served)?,
    };
    let ns = single(query, "ns")?;
    if let Some(ns) = &ns {
        let host_like = ns.len() <= MAX_NS_LEN
            && !ns.is_empty()
            && ns.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !host_like {
            return Err(OciError::InvalidQuery {
                field: "ns",
                why: "is not a registry host name",
            });
        }
    }
    Ok(PullRequest { route, head, ns })
}

/// The route for `rest` (the path after `/v2/`), read from the right.
fn route(
    rest: &str,
    query: Option<&str>,
    read_only: impl Fn() -> OciError,
    not_served: impl Fn() -> OciError,
) -> Result<Route, OciError> {
    if rest == "_catalog" {
        return Err(not_served());
    }
    let parts: Vec<&str> = rest.split('/').collect();
    let n = parts.len();
    let from = |k: usize| -> &[&str] { &parts[n - k..] };
    // Uploads and mounts: `<name>/blobs/uploads`, `<name>/blobs/uploads/`, `.../uploads/<id>`.
    let upload = (n >= 3 && from(2) == ["blobs", "uploads"])
        || (n >= 4 && from(3)[..2] == ["blobs", "uploads"]);
    if upload {
        return Err(read_only());
    }
    if n < 3 {
        return Err(not_served());
    }
    let name = || RepositoryName::parse(&parts[..n - 2].join("/"));
    match (parts[n - 2], parts[n - 1]) {
        ("tags", "list") => Ok(Route::TagsList {
            name: name()?,
            n: single(query, "n")?
                .map(|v| {
                    v.parse().map_err(|_| OciError::InvalidQuery {
                        field: "n",
                        why: "is not a number from 0 to 4294967295",
                    })
                })
                .transpose()?,
            last: single(query, "last")?.map(|t| Tag::parse(&t)).transpose()?,
        }),
        ("manifests", reference) => Ok(Route::Manifest {
            name: name()?,
            reference: Reference::parse(reference)?,
        }),
        ("blobs", digest) => Ok(Route::Blob {
            name: name()?,
            digest: Digest::parse(digest)?,
        }),
        _ => Err(not_served()),
    }
}

/// The one value of query parameter `key`; given twice is refused (two readers would keep
/// different ones).
/// The upstream path (below its base) of one page of `name`'s tags, rebuilt from the parsed
/// `n` and `last` only: nothing else of the client's query goes upstream, and the path is
/// also the page's cache key, so junk parameters cannot multiply upstream requests.
pub(crate) fn tags_list_path(name: &str, n: Option<u32>, last: Option<&Tag>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    if let Some(n) = n {
        query.append_pair("n", &n.to_string());
    }
    if let Some(last) = last {
        query.append_pair("last", last.as_str());
    }
    let query = query.finish();
    if query.is_empty() {
        format!("v2/{name}/tags/list")
    } else {
        format!("v2/{name}/tags/list?{query}")
    }
}

fn single(query: Option<&str>, key: &'static str) -> Result<Option<String>, OciError> {
    let mut found = None;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == key {
            if found.is_some() {
                return Err(OciError::InvalidQuery {
                    field: key,
                    why: "is given more than once",
                });
            }
            found = Some(v.into_owned());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn get(path: &str) -> Result<Route, OciError> {
        parse("GET", path, None).map(|r| r.route)
    }

    fn name(n: &str) -> RepositoryName {
        RepositoryName::parse(n).unwrap()
    }

    #[test]
    fn the_base_answers_get_and_head() {
        assert_eq!(get("/v2/").unwrap(), Route::Base);
        assert_eq!(get("/v2").unwrap(), Route::Base);
        assert!(parse("HEAD", "/v2/", None).unwrap().head);
        assert!(!parse("GET", "/v2/", None).unwrap().head);
        assert_eq!(get("/v1/").unwrap_err().code(), "registry_path_not_served");
        assert_eq!(get("/v2x/").unwrap_err().code(), "registry_path_not_served");
    }

    #[test]
    fn manifests_by_tag_and_by_digest_with_slashes_in_the_name() {
        assert_eq!(
            get("/v2/library/alpine/manifests/3.19").unwrap(),
            Route::Manifest {
                name: name("library/alpine"),
                reference: Reference::parse("3.19").unwrap()
            }
        );
        let by_digest = get(&format!("/v2/a/b/c/manifests/{D}")).unwrap();
        assert!(matches!(
            by_digest,
            Route::Manifest {
                reference: Reference::Digest(_),
                ..
            }
        ));
    }

    #[test]
    fn names_are_read_from_the_right_even_when_a_component_is_a_keyword() {
        let Route::Manifest { name: n, .. } = get("/v2/org/blobs/manifests/latest").unwrap() else {
            panic!("a manifest");
        };
        assert_eq!(n.as_str(), "org/blobs");
        let Route::Blob { name: n, .. } = get(&format!("/v2/x/manifests/blobs/{D}")).unwrap()
        else {
            panic!("a blob");
        };
        assert_eq!(n.as_str(), "x/manifests");
        let Route::TagsList { name: n, .. } = get("/v2/tags/list/tags/list").unwrap() else {
            panic!("a tag list");
        };
        assert_eq!(n.as_str(), "tags/list");
    }

    #[test]
    fn a_tag_list_goes_upstream_with_only_its_parsed_n_and_last() {
        let page = |q: &str| {
            let Route::TagsList { name, n, last } =
                parse("GET", "/v2/alpine/tags/list", Some(q)).unwrap().route
            else {
                panic!("a tag list");
            };
            tags_list_path(name.as_str(), n, last.as_ref())
        };
        assert_eq!(
            page("n=5&last=3.18&x=1&n2=%2e%2e&cb=999"),
            "v2/alpine/tags/list?n=5&last=3.18"
        );
        assert_eq!(page("last=3.18&n=5"), "v2/alpine/tags/list?n=5&last=3.18");
        assert_eq!(page("cb=1"), "v2/alpine/tags/list");
        assert_eq!(page("cb=2"), page(""), "one key for one page");
        // The twin: a tag list with its real parameters still asks for that page.
        assert_eq!(page("n=50"), "v2/alpine/tags/list?n=50");
    }

    #[test]
    fn blobs_need_a_sha256_digest() {
        assert_eq!(
            get(&format!("/v2/alpine/blobs/{D}")).unwrap(),
            Route::Blob {
                name: name("alpine"),
                digest: Digest::parse(D).unwrap()
            }
        );
        assert_eq!(
            get("/v2/alpine/blobs/latest").unwrap_err().code(),
            "oci_digest_invalid"
        );
        let sha512 = format!("/v2/alpine/blobs/sha512:{}", "a".repeat(128));
        assert_eq!(get(&sha512).unwrap_err().code(), "oci_digest_invalid");
    }

    #[test]
    fn tag_lists_take_n_and_last() {
        let r = parse("GET", "/v2/alpine/tags/list", Some("n=50&last=3.18")).unwrap();
        assert_eq!(
            r.route,
            Route::TagsList {
                name: name("alpine"),
                n: Some(50),
                last: Some(Tag::parse("3.18").unwrap())
            }
        );
        assert_eq!(
            get("/v2/alpine/tags/list").unwrap(),
            Route::TagsList {
                name: name("alpine"),
                n: None,
                last: None
            }
        );
        for bad in ["n=-1", "n=ten", "n=99999999999", "last=a/b", "n=1&n=2"] {
            let e = parse("GET", "/v2/alpine/tags/list", Some(bad)).unwrap_err();
            assert!(
                matches!(e, OciError::InvalidQuery { .. } | OciError::InvalidTag(_)),
                "{bad}: {e}"
            );
            assert_eq!(e.status(), 400);
        }
    }

    #[test]
    fn pushes_mounts_and_deletes_are_refused_with_405() {
        for (method, path, query) in [
            ("POST", "/v2/alpine/blobs/uploads/", None),
            (
                "POST",
                "/v2/alpine/blobs/uploads/",
                Some("mount=sha256:abc&from=other"),
            ),
            ("PATCH", "/v2/alpine/blobs/uploads/1f2e", None),
            (
                "PUT",
                "/v2/alpine/blobs/uploads/1f2e",
                Some("digest=sha256:abc"),
            ),
            ("GET", "/v2/alpine/blobs/uploads/1f2e", None),
            ("POST", "/v2/org/app/blobs/uploads", None),
            ("PUT", "/v2/alpine/manifests/latest", None),
            ("DELETE", "/v2/alpine/manifests/latest", None),
            ("DELETE", &format!("/v2/alpine/blobs/{D}"), None),
            ("POST", "/v2/", None),
            ("PUT", "/v2/alpine/manifests/-not-a-tag", None),
        ] {
            let e = parse(method, path, query).unwrap_err();
            assert_eq!(
                (e.code(), e.status()),
                ("oci_read_only", 405),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn the_catalog_referrers_and_strays_are_not_served() {
        for path in [
            "/v2/_catalog",
            &format!("/v2/alpine/referrers/{D}"),
            "/v2/alpine",
            "/v2/alpine/manifests",
            "/v2/alpine/manifests/latest/",
            "/v2/alpine/tags",
            "/registry/hub/v2/",
            "/",
        ] {
            let e = get(path).unwrap_err();
            assert_eq!(
                (e.code(), e.status()),
                ("registry_path_not_served", 404),
                "{path}"
            );
        }
    }

    #[test]
    fn a_bad_name_or_tag_in_the_path_is_400() {
        for path in [
            "/v2/Alpine/manifests/latest",
            "/v2/foo%2Fbar/manifests/latest",
            "/v2//alpine/manifests/latest",
            "/v2/alpine/manifests/-bad",
        ] {
            assert_eq!(get(path).unwrap_err().status(), 400, "{path}");
        }
    }

    #[test]
    fn containerd_ns_is_kept_as_text_and_checked() {
        let r = parse("GET", "/v2/alpine/manifests/latest", Some("ns=docker.io")).unwrap();
        assert_eq!(r.ns.as_deref(), Some("docker.io"));
        let r = parse("GET", "/v2/", Some("ns=127.0.0.1%3A5000")).unwrap();
        assert_eq!(r.ns.as_deref(), Some("127.0.0.1:5000"));
        for bad in ["ns=", "ns=a%2Fb", "ns=http%3A%2F%2Fx", "ns=a&ns=b"] {
            let e = parse("GET", "/v2/", Some(bad)).unwrap_err();
            assert_eq!(e.code(), "oci_query_invalid", "{bad}");
        }
    }
}
