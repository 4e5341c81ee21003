//! What is wrong with a request's shape, before any policy or upstream is involved: too large a
//! head, a method a route does not serve, a query that does not parse. Each has a stable code,
//! what happened (`Display`), the failed field and a safe next action; `serve/problem.rs` adds
//! the HTTP status and headers.

use std::fmt;
use std::net::IpAddr;

use http::Method;

use crate::errors::Origin;
use crate::fetch::MAX_MIRRORS;
use crate::store::Digest;

/// A request fetchgate will not serve as sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RequestError {
    /// The request head is over `[proxy] max_header_bytes`.
    HeaderTooLarge { size: usize, limit: usize },
    /// A client outside `[access] clients`.
    ClientNotAllowed(IpAddr),
    /// No route serves this path (`locator` is already redacted).
    NotFound { locator: String },
    /// A forward request whose path falls under registry `registry`'s upstream only once an
    /// encoded `/` or `\` in it is decoded: servers read it both ways.
    PathAmbiguous { registry: String },
    /// A `/love/v1/` path that is not an endpoint.
    NotLoveEndpoint(String),
    /// A method `[proxy] methods` does not list; `allow` is that list, for the `Allow` header.
    MethodNotForwarded { method: Method, allow: String },
    /// Cache entries are read with `GET` or `HEAD` only.
    MethodOnObject(Method),
    /// The LOVE API is read-only.
    MethodOnLove,
    /// Registry front-ends are read-only.
    MethodOnRegistry(Method),
    /// CONNECT without a `host:port`: judged like any locator the egress profile cannot read.
    MissingAuthority,
    /// The request line could not become an upstream request.
    InvalidRequest(String),
    /// A sha256 that is not 64 lowercase hex characters, in the path (`sha256`) or `pin`.
    InvalidDigest { field: &'static str, detail: String },
    /// `size` is not a whole number of bytes, at least 1.
    InvalidSize,
    /// More `url` parameters than [`MAX_MIRRORS`].
    TooManyMirrors,
    /// A fetch-through without `size`.
    MissingSize,
    /// `size` over `[cache] max_object_bytes`.
    SizeTooLarge { size: u64, digest: Digest, max: u64 },
    /// `size` differs from the size of the verified entry with that digest.
    SizeMismatch {
        digest: Digest,
        claimed: u64,
        stored: u64,
    },
    /// `engine` is not `NAME=VERSION`.
    InvalidEngine,
    /// `/love/v1/fetch` without `manifest`.
    MissingManifest,
    /// A registry request whose `Host` cannot be the base of rewritten URLs.
    InvalidHostHeader,
    /// No verified entry, and no fetch-through asked for.
    NotInCache(Digest),
    /// The entry went between being fetched and being served; a retry finds or refetches it.
    Evicted(Digest),
    /// A `Range` outside an entry of `size` bytes.
    RangeNotSatisfiable { size: u64 },
    /// An absolute-form request for fetchgate's own admin listener: the proxy port never
    /// serves the admin routes (`locator` is already redacted).
    AdminNotProxied { locator: String },
    /// A `CONNECT` to one of fetchgate's own listeners: a client with `HTTPS_PROXY` set to
    /// fetchgate asking to reach a TLS listener of fetchgate through itself. Not tunnelled
    /// (a tunnel would reach the listener from fetchgate's own address, not the client's),
    /// and not an egress refusal with a trust rule, which would be the wrong fix.
    SelfTunnel { authority: String },
    /// A request inside an intercepted tunnel for `tunnel` named another host.
    InterceptMisdirected { tunnel: String, named: String },
}

impl RequestError {
    /// The stable snake_case code.
    pub(crate) fn code(&self) -> &'static str {
        use RequestError::*;
        match self {
            HeaderTooLarge { .. } => "request_header_too_large",
            ClientNotAllowed(_) => "client_not_allowed",
            NotFound { .. } | NotLoveEndpoint(_) => "not_found",
            PathAmbiguous { .. } => "request_path_ambiguous",
            MethodNotForwarded { .. } | MethodOnObject(_) | MethodOnLove | MethodOnRegistry(_) => {
                "method_not_allowed"
            }
            // The egress profile's own code for a locator it cannot read.
            MissingAuthority => "invalid_locator",
            InvalidRequest(_) => "invalid_request",
            InvalidDigest { .. } => "invalid_digest",
            InvalidSize => "invalid_size",
            TooManyMirrors => "too_many_mirrors",
            MissingSize => "missing_size",
            SizeTooLarge { .. } => "size_too_large",
            SizeMismatch { .. } => "size_mismatch",
            InvalidEngine => "invalid_engine",
            MissingManifest => "missing_manifest",
            InvalidHostHeader => "invalid_host_header",
            NotInCache(_) => "not_in_cache",
            Evicted(_) => "entry_evicted",
            RangeNotSatisfiable { .. } => "range_not_satisfiable",
            AdminNotProxied { .. } => "admin_not_proxied",
            SelfTunnel { .. } => "own_listener_not_tunnelled",
            InterceptMisdirected { .. } => "intercept_host_mismatch",
        }
    }

    /// Where it came from: the client, except what fetchgate's own state explains.
    pub(crate) fn origin(&self) -> Origin {
        use RequestError::*;
        match self {
            MissingAuthority => Origin::Policy,
            Evicted(_) => Origin::Internal,
            _ => Origin::Downstream,
        }
    }

    /// The failed field, if one did.
    pub(crate) fn field(&self) -> Option<&'static str> {
        use RequestError::*;
        match self {
            HeaderTooLarge { .. } => Some("max_header_bytes"),
            ClientNotAllowed(_) => Some("clients"),
            MethodNotForwarded { .. } | MethodOnObject(_) | MethodOnRegistry(_) => Some("method"),
            InvalidDigest { field, .. } => Some(field),
            InvalidSize | MissingSize | SizeTooLarge { .. } | SizeMismatch { .. } => Some("size"),
            TooManyMirrors => Some("url"),
            InvalidEngine => Some("engine"),
            MissingManifest => Some("manifest"),
            InvalidHostHeader | InterceptMisdirected { .. } => Some("Host"),
            PathAmbiguous { .. } => Some("path"),
            RangeNotSatisfiable { .. } => Some("Range"),
            _ => None,
        }
    }

    /// A safe next action.
    pub(crate) fn next(&self) -> &'static str {
        use RequestError::*;
        match self {
            HeaderTooLarge { .. } => {
                "send fewer or smaller headers, or ask the operator to raise [proxy] max_header_bytes"
            }
            ClientNotAllowed(_) => {
                "use the proxy from an allowed network, or ask the operator to add your range to [access] clients"
            }
            NotFound { .. } => {
                "send proxy requests in absolute form (GET http://host/path) or CONNECT host:443"
            }
            NotLoveEndpoint(_) => "use /love/v1/fetch?manifest=URL or /love/v1/conflicts",
            PathAmbiguous { .. } => "request the path with `/` written as `/`, not percent-encoded",
            MethodNotForwarded { .. } => {
                "use GET or HEAD, or ask the operator to list the method in [proxy] methods"
            }
            MethodOnObject(_) => "use GET or HEAD",
            MethodOnLove => "use GET",
            MethodOnRegistry(_) => {
                "registries are read-only through fetchgate: use GET or HEAD; publish to the registry itself"
            }
            MissingAuthority => "send CONNECT host:443",
            InvalidRequest(_) => "check the request line",
            InvalidDigest { field: "pin", .. } => "pin=<64 lowercase hex>",
            InvalidDigest { .. } => "use /sha256/<64 lowercase hex characters>",
            InvalidSize => "pass the artifact's exact size in bytes",
            TooManyMirrors => "list fewer mirrors",
            MissingSize => "add size=N, the artifact's exact size in bytes",
            SizeTooLarge { .. } => {
                "fetch it from a mirror directly, or ask the operator to raise [cache] max_object_bytes"
            }
            SizeMismatch { .. } => {
                "check the expected size and sha256: they disagree, so they name other bytes than meant"
            }
            InvalidEngine => "for example engine=node=20.11.0",
            MissingManifest => "add manifest=<URL>",
            InvalidHostHeader => "send Host: <the address you reach fetchgate at>",
            NotInCache(_) => {
                "add ?size=N&url=MIRROR to fetch it through, or fetch it through the proxy first"
            }
            Evicted(_) => "retry",
            RangeNotSatisfiable { .. } => {
                "ask for a range inside the entry, or drop the Range header"
            }
            AdminNotProxied { .. } => {
                "reach the admin listener directly: add its address to NO_PROXY (no_proxy), or use curl --noproxy '*'"
            }
            SelfTunnel { .. } => {
                "connect to fetchgate's listener directly: add its address or name to NO_PROXY (no_proxy)"
            }
            InterceptMisdirected { .. } => {
                "send each host's requests through a CONNECT to that host (a client does so when HTTPS_PROXY is set)"
            }
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RequestError::*;
        match self {
            HeaderTooLarge { size, limit } => {
                write!(f, "the request head is {size} bytes; the limit is {limit}")
            }
            ClientNotAllowed(ip) => write!(f, "{ip} is not in [access] clients"),
            NotFound { locator } => write!(f, "no resource at {locator}"),
            PathAmbiguous { registry } => write!(
                f,
                "the path falls under registry {registry}'s upstream once an encoded / or \\ is decoded, as some servers do; it is neither verified nor forwarded"
            ),
            NotLoveEndpoint(path) => write!(f, "no LOVE endpoint at {path}"),
            MethodNotForwarded { method, .. } => {
                write!(f, "{method} is not forwarded by this proxy")
            }
            MethodOnObject(method) => write!(f, "{method} is not allowed on cache entries"),
            MethodOnLove => f.write_str("the LOVE API is read-only"),
            MethodOnRegistry(method) => {
                write!(f, "{method} is not served by registry front-ends")
            }
            MissingAuthority => f.write_str("CONNECT needs a host:port authority"),
            InvalidRequest(why) => f.write_str(why),
            InvalidDigest { detail, .. } => f.write_str(detail),
            InvalidSize => f.write_str("size must be a whole number of bytes, at least 1"),
            TooManyMirrors => write!(f, "at most {MAX_MIRRORS} url parameters"),
            MissingSize => f.write_str("fetch-through needs the expected size"),
            SizeTooLarge { size, digest, max } => write!(
                f,
                "size {size} for sha256 {digest} is over [cache] max_object_bytes = {max}"
            ),
            SizeMismatch {
                digest,
                claimed,
                stored,
            } => write!(
                f,
                "size {claimed} does not match the verified entry for sha256 {digest}, which is {stored} bytes"
            ),
            InvalidEngine => f.write_str("engine is NAME=VERSION"),
            MissingManifest => f.write_str("the manifest URL is missing"),
            InvalidHostHeader => {
                f.write_str("registry requests need a Host header naming this fetchgate")
            }
            NotInCache(digest) => write!(f, "no verified entry for sha256 {digest}"),
            Evicted(digest) => write!(f, "sha256 {digest} was evicted while being served"),
            RangeNotSatisfiable { size } => write!(f, "the entry is {size} bytes"),
            InterceptMisdirected { tunnel, named } => write!(
                f,
                "this tunnel was opened (CONNECT) for {tunnel}; a request inside it named {named}"
            ),
            SelfTunnel { authority } => write!(
                f,
                "{authority} is one of fetchgate's own listeners; CONNECT through the proxy port does not tunnel to fetchgate itself"
            ),
            AdminNotProxied { locator } => write!(
                f,
                "{locator} is fetchgate's own admin listener, which is not served through the proxy port"
            ),
        }
    }
}
