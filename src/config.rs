//! The operator's config file (TOML), read and checked as a whole before anything starts.
//!
//! Unknown tables and keys are errors, not warnings: a typo in a deny rule must never
//! silently widen what fetchgate reaches.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use crate::access::policy::{Anonymous, PolicyChecks};
use crate::access::{Access, AccessSection};
use crate::connect::tls::{TlsSection, client_config};
use crate::connect::{Egress, Resolver, ResolverSection, ResolverSettings};
use crate::decide::{EgressSection, Policy, Profile};
use crate::fetch::CacheLimits;
use crate::fetch::DEFAULT_MAX_REDIRECTS;
use crate::listen::intercept::{Intercept, InterceptSection};
use crate::listen::limits::{Limits, ListenSection, ProxySection};
use crate::listen::tls::ListenTls;
use crate::metrics::Metrics;
use crate::pack::caps::{LoveSection, LoveSettings};
use crate::pack::{LgflowSection, OpenwopSection, PackConfig};
use crate::registry::protocol::Configured;
use crate::registry::section::{RegistrySection, from_sections};
use crate::shared::{SharedSection, SharedSettings};
use crate::store::{CacheSection, StoreSettings};
use crate::tee::TeeSettings;
use crate::toml_file::{FileError, TomlSource};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    listen: ListenSection,
    #[serde(default)]
    access: AccessSection,
    #[serde(default)]
    proxy: ProxySection,
    #[serde(default)]
    tls: TlsSection,
    #[serde(default)]
    resolver: ResolverSection,
    #[serde(default)]
    egress: EgressSection,
    #[serde(default)]
    cache: CacheSection,
    #[serde(default)]
    love: LoveSection,
    #[serde(default)]
    registry: Vec<RegistrySection>,
    #[serde(default)]
    openwop: OpenwopSection,
    #[serde(default)]
    lgflow: LgflowSection,
    shared: Option<SharedSection>,
    intercept: Option<toml::Spanned<InterceptSection>>,
}

/// Everything fetchgate runs with, checked.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it was read from (absolute), `None` for the embedded defaults.
    pub file: Option<std::path::PathBuf>,
    /// The egress policy: built-in profile plus operator rules.
    pub policy: Arc<Policy>,
    /// How names are resolved.
    pub(crate) resolver: ResolverSettings,
    /// TLS client configuration for upstreams (verification always on).
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// Who may use the proxy.
    pub(crate) access: Access,
    /// TLS on fetchgate's own listeners (`[listen.tls.*]`).
    pub(crate) listen_tls: ListenTls,
    /// Listener and limits.
    pub limits: Limits,
    /// The content cache (`[cache]`), each part read by the module that uses it.
    pub cache: CacheSettings,
    /// Most redirects followed by fetch-through.
    pub(crate) max_redirects: usize,
    /// Whether an `https` → `http` redirect is followed (default: refused).
    pub(crate) allow_redirect_downgrade: bool,
    /// LOVE caps.
    pub(crate) love: LoveSettings,
    /// Registry front-ends (`[[registry]]`).
    pub(crate) registries: Vec<Configured>,
    /// Trusted OpenWOP registries and LGFlow keys (`[[openwop.registry]]`, `[lgflow]`).
    pub(crate) packs: PackConfig,
    /// The shared tier (`[shared]`), if configured.
    pub(crate) shared: Option<SharedSettings>,
    /// TLS interception for listed hosts (`[intercept]`), if configured.
    pub(crate) intercept: Option<Arc<Intercept>>,
}

impl Config {
    /// What an operator should know once fetchgate listens: settings that work but leave
    /// something off.
    pub fn start_up_warnings(&self) -> Vec<String> {
        let mut warnings = self.unauthenticated_listeners();
        if self.shared.as_ref().is_some_and(|s| s.fleet_key.is_none()) {
            warnings.push(
                "metadata is not shared: [shared] has no fleet_key_file, so each instance asks \
                 the upstream for packuments, pages, indexes and tags itself (artifacts are \
                 still shared); add a fleet key (see the README's fleet section)"
                    .to_string(),
            );
        }
        warnings
    }

    /// While `[[access.policy]]` tables exist: one line per listener that serves the policed
    /// routes to a client with no identity (no token is required, and the listener does not
    /// require a client certificate), saying what such a client gets.
    pub fn unauthenticated_listeners(&self) -> Vec<String> {
        let policies = &self.access.policies;
        if !policies.any() || self.access.tokens_required() {
            return Vec::new();
        }
        let gets = match policies.anonymous {
            Anonymous::EveryPolicy => {
                "is held to every [[access.policy]] at once ([access] anonymous = \"every_policy\")"
            }
            Anonymous::Global => "gets the global policy ([access] anonymous = \"global\")",
        };
        let mut listeners = Vec::new();
        if !self.listen_tls.requires_certs(false) {
            listeners.push(format!("[listen] proxy {}", self.limits.listen));
        }
        if !self.listen_tls.requires_certs(true) {
            for r in &self.registries {
                if let Some(addr) = r.settings.listen {
                    listeners.push(format!("[[registry]] {} listen {addr}", r.settings.name));
                }
            }
        }
        listeners
            .into_iter()
            .map(|l| {
                format!(
                    "{l} serves clients without a certificate or token: such a client {gets}; \
                     require client certificates there (client_auth = \"required\") or a token \
                     ([access] tokens_file) to tell clients apart"
                )
            })
            .collect()
    }

    /// The embedded defaults: the built-in profile, default ports, the system resolver.
    pub fn defaults() -> Result<Self, FileError> {
        Self::from_toml("<defaults>", "")
    }

    /// Reads `path`, or the defaults when `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, FileError> {
        let Some(path) = path else {
            return Self::defaults();
        };
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| FileError {
            file: name.clone(),
            line: None,
            field: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut config = Self::from_toml_in(&name, &text, base)?;
        config.file = Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(config)
    }

    /// Parses and checks config text, reporting errors against `file`; relative paths in it
    /// are taken from the current folder.
    pub fn from_toml(file: &str, text: &str) -> Result<Self, FileError> {
        Self::from_toml_in(file, text, Path::new("."))
    }

    /// Parses and checks config text; relative paths in it are taken from `base`.
    pub fn from_toml_in(file: &str, text: &str, base: &Path) -> Result<Self, FileError> {
        let src = TomlSource::new(file, text);
        let raw: ConfigFile = src.parse()?;
        let profile = Profile::builtin()?;
        let policy = Policy::new(profile, &raw.egress, &src)?;
        let resolver = ResolverSettings::from_section(&raw.resolver, &src)?;
        let limits = Limits::from_sections(&raw.listen, &raw.proxy, &src)?;
        let mut cache = CacheSettings::from_section(&raw.cache, base, &src)?;
        // While the tee holds a chunk, the upstream body is not read: a wait as long as the
        // body's idle time-out would cut off a healthy upstream. Unset, the stall bound gives
        // way to a short idle time-out; set, it must stay below it.
        if raw.cache.tee_stall_ms.is_none() && cache.tee.stall >= limits.body_idle_timeout {
            cache.tee.stall = limits.body_idle_timeout / 2;
        }
        if cache.tee.stall >= limits.body_idle_timeout {
            let message = format!(
                "[cache] tee_stall_ms ({} ms) must be below [proxy] body_idle_timeout_ms ({} ms)",
                cache.tee.stall.as_millis(),
                limits.body_idle_timeout.as_millis()
            );
            return Err(
                match (&raw.cache.tee_stall_ms, &raw.proxy.body_idle_timeout_ms) {
                    (Some(v), _) => src.error_at(v.span(), message),
                    (None, Some(v)) => src.error_at(v.span(), message),
                    (None, None) => src.error("cache.tee_stall_ms", message),
                },
            );
        }
        let registries = from_sections(&raw.registry, base, &src)?;
        let listen_tls = ListenTls::from_section(&raw.listen.tls, base, &src)?;
        let checks = PolicyChecks {
            global: &policy,
            registries: registries
                .iter()
                .map(|r| r.settings.name.as_str())
                .collect(),
            client_certs: listen_tls.any_client_certs(),
        };
        let access = Access::from_section(&raw.access, base, &src)?.with_policies(
            &raw.access.policy,
            &checks,
            &src,
        )?;
        Ok(Self {
            file: None,
            policy: Arc::new(policy),
            resolver,
            tls: client_config(&raw.tls, base, &src)?,
            access,
            listen_tls,
            limits,
            cache,
            love: LoveSettings::from_section(&raw.love, &src)?,
            registries,
            packs: PackConfig::from_sections(&raw.openwop, &raw.lgflow, base, &src)?,
            shared: SharedSettings::from_section(raw.shared.as_ref(), base, &src, &|k| {
                std::env::var(k).ok()
            })?,
            max_redirects: match &raw.egress.max_redirects {
                None => DEFAULT_MAX_REDIRECTS,
                Some(m) if *m.get_ref() > 20 => {
                    return Err(src.error_at(m.span(), "max_redirects must be from 0 to 20"));
                }
                Some(m) => *m.get_ref(),
            },
            allow_redirect_downgrade: raw.egress.allow_redirect_downgrade.unwrap_or(false),
            intercept: Intercept::from_section(raw.intercept.as_ref(), base, &src)?,
        })
    }

    /// The fetch-through service over `store`, with this config's policy, TLS and limits.
    /// Must run inside a Tokio runtime.
    pub(crate) fn fetcher(
        &self,
        store: Arc<crate::store::Store>,
        metrics: Arc<Metrics>,
    ) -> crate::fetch::Fetcher {
        let timeouts = crate::fetch::upstream::Timeouts {
            connect: self.limits.connect_timeout,
            response_head: self.limits.response_head_timeout,
        };
        let limits = crate::fetch::FetchLimits {
            timeouts,
            max_redirects: self.max_redirects,
            body_idle: self.limits.body_idle_timeout,
            cache: self.cache.fetch,
        };
        crate::fetch::Fetcher::new(
            self.egress(metrics.clone()),
            self.tls.clone(),
            store,
            limits,
            metrics,
        )
        .allow_redirect_downgrade(self.allow_redirect_downgrade)
    }

    /// The policy with a resolver built from these settings, counting into `metrics`. Must
    /// run inside a Tokio runtime.
    pub fn egress(&self, metrics: Arc<Metrics>) -> Egress {
        Egress::new(self.policy.clone(), Resolver::new(&self.resolver), metrics)
    }
}

/// `[cache]`, checked: one table in the file, read into the settings of each module that uses
/// a part of it, so no module reads another's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSettings {
    /// The store's: directory, disk and memory budgets.
    pub store: StoreSettings,
    /// The fetcher's: largest artifact, one fetch's time, the single-flight hedge.
    pub fetch: CacheLimits,
    /// The proxy tee's: stall bound and public hosts.
    pub tee: TeeSettings,
    /// The registry metadata's disk budget (`metadata_max_bytes`).
    pub metadata_max_bytes: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            store: StoreSettings::default(),
            fetch: CacheLimits::default(),
            tee: TeeSettings::default(),
            metadata_max_bytes: crate::registry::metadata::DEFAULT_DISK_BYTES,
        }
    }
}

impl CacheSettings {
    /// Checks `[cache]`, each part by its module; a relative `dir` is taken from `base`.
    fn from_section(
        section: &CacheSection,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        Ok(Self {
            store: StoreSettings::from_section(section, base, src)?,
            fetch: CacheLimits::from_section(section, src)?,
            metadata_max_bytes: crate::registry::metadata::disk_bytes_from_section(section, src)?,
            tee: TeeSettings::from_section(section, src)?,
        })
    }
}
