//! The PyPI simple repository API: project pages read from the upstream in PEP 691 JSON or
//! PEP 503 HTML (whichever it answered: [`upstream`]) and served in JSON or PEP 503 HTML as the client's `Accept` prefers (`Vary: Accept`), file URLs
//! pointed at fetchgate with their SHA-256 kept, `.metadata` sidecars (PEP 658/714) served and
//! verified the same way, yanked flags and `requires-python` passed through.
//!
//! A file URL names the project whose page listed it (`-/files/<project>/<sha256>/<file>`),
//! and fetchgate remembers each file under its registry and project: the upstream URL and the
//! sidecar digest used are the ones that registry's page for that project published.

mod files;
mod html;
mod page_error;
mod upstream;
pub(crate) mod upstream_html;

use crate::registry::error::RegistryError;
use std::sync::Arc;

use crate::registry::core::RegistryCore;
use crate::registry::core::artifact::{Serving, sha256_expected};
use crate::registry::kind::KindInfo;
use crate::registry::own_keys::OwnKeys;
use crate::registry::protocol::{Handled, KindFront, KindRow, KindSettings, NoOwnKeys};
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::toml_file::FileError;
use bytes::Bytes;
pub(crate) use html::render_html;
use page_error::{PageError, UPSTREAM_FORM, not_a_page};
use serde_json::{Map, Value};
use upstream::UPSTREAM_ACCEPT;

use crate::store::Digest;

/// PEP 691 JSON.
pub(crate) const JSON: &str = "application/vnd.pypi.simple.v1+json";
/// PEP 691's name for PEP 503 HTML.
pub(crate) const HTML: &str = "application/vnd.pypi.simple.v1+html";

/// What a path under a PyPI mount asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A project page, by its name as requested.
    Project {
        /// The project name.
        name: String,
    },
    /// A distribution file, by the SHA-256 the project page published.
    File {
        /// The project whose page listed it, as the URL names it.
        project: String,
        /// Its SHA-256.
        sha256: Digest,
        /// Its file name.
        filename: String,
    },
    /// A file's core metadata sidecar (`<file>.metadata`).
    Metadata {
        /// The project whose page listed the distribution.
        project: String,
        /// The SHA-256 of the distribution it belongs to.
        sha256: Digest,
        /// The distribution's file name.
        filename: String,
    },
    /// A distribution file by the form without its project (`-/files/<sha256>/<filename>`,
    /// from before records were kept per project; lockfiles may hold it): served only when
    /// one project of this registry listed it, and never as a `.metadata` sidecar.
    Unscoped {
        /// Its SHA-256.
        sha256: Digest,
        /// Its file name.
        filename: String,
    },
    /// Anything else.
    Other,
}

/// Reads the path below the mount: `/<project>/`, `/-/files/<project>/<sha256>/<filename>
/// [.metadata]`, or the older `/-/files/<sha256>/<filename>` (the file only), each also under
/// `/simple/` (the layout Nexus and Artifactory users type; `/simple/` alone is still the
/// project `simple`).
pub(crate) fn parse_path(rest: &str) -> Request {
    let path = rest.strip_prefix('/').unwrap_or(rest);
    let path = path
        .strip_prefix("simple/")
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    if let Some(file) = path.strip_prefix("-/files/") {
        let mut parts = file.splitn(3, '/');
        let (Some(project), Some(hex), Some(filename)) = (parts.next(), parts.next(), parts.next())
        else {
            return match file
                .split_once('/')
                .and_then(|(hex, f)| Some((hex, decoded_filename(f)?)))
            {
                Some((hex, filename))
                    if valid_filename(&filename) && !filename.ends_with(".metadata") =>
                {
                    Digest::parse(hex).map_or(Request::Other, |sha256| Request::Unscoped {
                        sha256,
                        filename,
                    })
                }
                _ => Request::Other,
            };
        };
        let Some(filename) = decoded_filename(filename) else {
            return Request::Other;
        };
        let filename = filename.as_str();
        let (true, Ok(sha256), true) = (
            valid_project(project),
            Digest::parse(hex),
            valid_filename(filename),
        ) else {
            return Request::Other;
        };
        let project = project.to_string();
        return match filename.strip_suffix(".metadata") {
            Some(dist) => Request::Metadata {
                project,
                sha256,
                filename: dist.to_string(),
            },
            None => Request::File {
                project,
                sha256,
                filename: filename.to_string(),
            },
        };
    }
    let name = path.strip_suffix('/').unwrap_or(path);
    if valid_project(name) {
        Request::Project {
            name: name.to_string(),
        }
    } else {
        Request::Other
    }
}

/// A project name as a path segment: letters, digits, `-`, `_`, `.`, starting with a letter
/// or digit.
fn valid_project(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

/// A file name fetchgate puts in a file URL: no path separator, dot segment or control.
pub(crate) fn valid_filename(f: &str) -> bool {
    !f.is_empty()
        && f.len() <= 255
        && !f.contains('/')
        && !f.contains('\\')
        && f != "."
        && f != ".."
        && !f.chars().any(char::is_control)
}

/// Whether fetchgate lists a file an upstream page names `f`: a valid name that pip reads back
/// from its URL as itself (no `%`: pip percent-decodes a link's path twice), and not one that
/// fetchgate's own URL for it would route as another file's `.metadata` sidecar (no
/// distribution's name ends so; found by the `pypi_json` fuzz target).
pub(crate) fn listable_filename(f: &str) -> bool {
    valid_filename(f) && !f.contains('%') && !f.ends_with(".metadata")
}

/// Whether a client wants JSON, by its `Accept` (q-values honoured; no `Accept` means HTML,
/// as PEP 691 asks for compatibility with old clients).
pub(crate) fn wants_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    let (mut json, mut html) = (0.0f32, 0.0f32);
    for item in crate::header_list::elements(accept) {
        let (kind, q) = crate::header_list::media_range(item);
        match kind.as_str() {
            "application/vnd.pypi.simple.v1+json" | "application/vnd.pypi.simple.latest+json" => {
                json = json.max(q)
            }
            "application/vnd.pypi.simple.v1+html"
            | "application/vnd.pypi.simple.latest+html"
            | "text/html"
            | "*/*" => html = html.max(q),
            _ => {}
        }
    }
    json > 0.0 && json >= html
}

/// A file the project page names, as fetchgate must remember it to fetch it later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileRecord {
    /// The published SHA-256.
    pub(crate) sha256: Digest,
    /// The file name.
    pub(crate) filename: String,
    /// The upstream URL (absolute).
    pub(crate) url: String,
    /// The SHA-256 of its `.metadata` sidecar, when the page published one.
    pub(crate) metadata_sha256: Option<Digest>,
}

/// A project page, read from upstream JSON.
#[derive(Clone, Debug)]
pub(crate) struct Page {
    /// The page as JSON, with file URLs pointed at fetchgate.
    pub(crate) doc: Value,
    /// The files it names.
    pub(crate) files: Vec<FileRecord>,
}

/// Reads an upstream PEP 691 page of `project` (canonical) fetched from `page_url`, keeps only
/// files with a usable SHA-256 (nothing else can be verified), and points their URLs at
/// `<base>-/files/<project>/<sha256>/<filename>`. A `.metadata` sidecar without a SHA-256 is
/// hidden, so pip fetches the verified file instead.
pub(crate) fn read_page(
    body: &[u8],
    page_url: &url::Url,
    base: &str,
    project: &str,
) -> Result<Page, PageError> {
    let mut doc: Value =
        serde_json::from_slice(body).map_err(|e| not_a_page(body, page_url, Some(e)))?;
    let Some(files) = doc.get_mut("files").and_then(Value::as_array_mut) else {
        return Err(not_a_page(body, page_url, None));
    };
    let mut records = Vec::new();
    let mut kept = Vec::new();
    for mut file in files.drain(..) {
        let Some(obj) = file.as_object_mut() else {
            continue;
        };
        let text =
            |o: &Map<String, Value>, k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(filename), Some(url)) = (text(obj, "filename"), text(obj, "url")) else {
            continue;
        };
        let sha256 = obj
            .get("hashes")
            .and_then(|h| h.get("sha256"))
            .and_then(Value::as_str)
            .and_then(|h| Digest::parse(&h.to_ascii_lowercase()).ok());
        // pip reads a file's name from its URL, percent-decoding it twice (`Link.path`, then
        // `Link.filename`): a name holding `%` would reach it as another name, and one ending
        // in `.metadata` would be asked for as a sidecar, so neither is listed (as on the HTML
        // path).
        let (Some(sha256), true, Ok(absolute)) =
            (sha256, listable_filename(&filename), page_url.join(&url))
        else {
            continue;
        };
        let metadata_sha256 = [
            "core-metadata",
            "dist-info-metadata",
            "data-dist-info-metadata",
        ]
        .iter()
        .find_map(|k| obj.get(*k))
        .and_then(|m| m.get("sha256"))
        .and_then(Value::as_str)
        .and_then(|h| Digest::parse(&h.to_ascii_lowercase()).ok());
        let metadata = match metadata_sha256 {
            Some(d) => serde_json::json!({ "sha256": d.hex() }),
            None => Value::Bool(false),
        };
        for key in ["core-metadata", "dist-info-metadata"] {
            obj.insert(key.into(), metadata.clone());
        }
        obj.remove("data-dist-info-metadata");
        let url = file_url(base, project, &sha256, &filename);
        obj.insert("url".into(), Value::String(url));
        let mut absolute = absolute;
        absolute.set_fragment(None);
        records.push(FileRecord {
            sha256,
            filename,
            url: absolute.to_string(),
            metadata_sha256,
        });
        kept.push(file);
    }
    if let Some(files) = doc.get_mut("files").and_then(Value::as_array_mut) {
        *files = kept;
    }
    Ok(Page {
        doc,
        files: records,
    })
}

/// What a file name keeps unescaped as a URL path segment: RFC 3986's unreserved characters
/// and the sub-delimiters a path segment may hold. Everything else (`%`, `#`, `?`, `/`, `"`,
/// space, non-ASCII) is percent-encoded, so the URL a client is sent names exactly this file,
/// and a URL parser (pip's, the `url` crate's) leaves it as written.
const FILENAME_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// Where fetchgate serves a file a page of `project` listed: `<base>-/files/<project>/<sha256>/
/// <filename>`, the file name percent-encoded as one path segment ([`parse_path`] decodes it).
pub(crate) fn file_url(base: &str, project: &str, sha256: &Digest, filename: &str) -> String {
    let segment = percent_encoding::utf8_percent_encode(filename, FILENAME_SEGMENT);
    format!("{base}-/files/{project}/{}/{segment}", sha256.hex())
}

/// A file name as a request path carries it: percent-decoded once ([`file_url`] encodes it),
/// `None` when the result is not UTF-8.
fn decoded_filename(segment: &str) -> Option<String> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|f| f.into_owned())
}

/// The page as PEP 691 JSON.
pub(crate) fn render_json(page: &Page) -> Bytes {
    Bytes::from(page.doc.to_string())
}

/// The `kind = "pypi"` row of the registry-kind table: PyPI simple pages and files.
pub(crate) const ROW: KindRow = KindRow {
    info: KindInfo {
        name: "pypi",
        canonical: crate::registry::names::pep503,
        bare_token_scheme: Some("Bearer"),
        client_setup: |r| format!("pip config set global.index-url {}simple/", r.base()),
        upstream_shape: upstream::wrong_shape,
    },
    keys: &[],
    read,
};

/// A pypi registry has no keys of its own, and its front keeps no state.
fn read(_: &mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError> {
    Ok(Arc::new(NoOwnKeys(|| Arc::new(PypiFront))))
}

/// The pypi part of one registry.
struct PypiFront;

impl KindFront for PypiFront {
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a> {
        Box::pin(async move { Pypi { core }.pypi(front, ask).await })
    }
}

/// The registry core at work for one pypi request.
pub(super) struct Pypi<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
}

impl Pypi<'_> {
    pub(super) async fn pypi(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        match parse_path(ask.path) {
            Request::Project { name } => {
                let name = self.core.judge(front, &name)?;
                let path = format!("{name}/");
                let (entry, freshness) =
                    self.core.meta(front, &name, &path, UPSTREAM_ACCEPT).await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!(
                        "project {name} at {}{path} (if no project is ever found, check the upstream: {UPSTREAM_FORM})",
                        front.settings.upstream
                    )));
                }
                let (content_type, body) = self.pypi_page(front, &name, &path, &entry, ask).await?;
                Ok(Reply::Document {
                    content_type: content_type.into(),
                    body,
                    vary_accept: true,
                    freshness,
                })
            }
            Request::File {
                project,
                sha256,
                filename,
            } => {
                let (project, record) = self.listed_file(front, &project, &sha256, &filename)?;
                let expected = sha256_expected(&sha256);
                let url = record.url.clone();
                self.core
                    .artifact(
                        front,
                        &expected,
                        || Ok(url),
                        &project,
                        &filename,
                        Serving::for_ask(ask),
                    )
                    .await
            }
            Request::Metadata {
                project,
                sha256,
                filename,
            } => {
                let (project, record) = self.listed_file(front, &project, &sha256, &filename)?;
                let meta = record
                    .metadata_sha256
                    .as_deref()
                    .and_then(|h| Digest::parse(h).ok())
                    .ok_or_else(|| RegistryError::NotFound(format!("metadata for {filename}")))?;
                let url = format!("{}.metadata", record.url);
                self.core
                    .artifact(
                        front,
                        &sha256_expected(&meta),
                        || Ok(url),
                        &project,
                        &format!("{filename}.metadata"),
                        Serving::for_ask(ask),
                    )
                    .await
            }
            Request::Unscoped { sha256, filename } => {
                let project = self.only_listing(front, &sha256, &filename).await?;
                let (project, record) = self.listed_file(front, &project, &sha256, &filename)?;
                let expected = sha256_expected(&sha256);
                self.core
                    .artifact(
                        front,
                        &expected,
                        || Ok(record.url),
                        &project,
                        &filename,
                        Serving::for_ask(ask),
                    )
                    .await
            }
            Request::Other => Err(RegistryError::NotServed(ask.path.to_string())),
        }
    }
}

mod page;

#[cfg(test)]
mod tests;
