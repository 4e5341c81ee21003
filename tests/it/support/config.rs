//! A small builder for proxy config TOML, so tests say which upstreams they trust instead of
//! spelling out `[[egress.trust]]` tables by hand. Parts come out in the order they were added.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

/// Config text under construction: raw tables and trust rules, in the order added.
#[derive(Default, Clone)]
pub struct Toml {
    parts: Vec<Part>,
}

#[derive(Clone)]
enum Part {
    Raw(String),
    Trust {
        cidr: String,
        ports: Vec<u16>,
        hosts: Vec<String>,
    },
}

impl Toml {
    /// An empty config; every setting keeps its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// A `[[egress.trust]]` rule for exactly `addr`: its IP as a `/32` and its port.
    pub fn trust(self, addr: SocketAddr) -> Self {
        self.trust_ports(addr.ip(), &[addr.port()])
    }

    /// A `[[egress.trust]]` rule for `ip` as a `/32` and each of `ports`.
    pub fn trust_ports(self, ip: impl fmt::Display, ports: &[u16]) -> Self {
        self.trust_cidr(format!("{ip}/32"), ports)
    }

    /// A `[[egress.trust]]` rule for the whole `cidr` (e.g. `"127.0.0.0/8"`) and `ports`.
    pub fn trust_cidr(mut self, cidr: impl Into<String>, ports: &[u16]) -> Self {
        self.parts.push(Part::Trust {
            cidr: cidr.into(),
            ports: ports.to_vec(),
            hosts: Vec::new(),
        });
        self
    }

    /// Adds `name` to the `hosts` of the last trust rule. Panics if there is none.
    pub fn host(mut self, name: &str) -> Self {
        match self.parts.iter_mut().rev().find_map(|p| match p {
            Part::Trust { hosts, .. } => Some(hosts),
            Part::Raw(_) => None,
        }) {
            Some(hosts) => hosts.push(name.to_string()),
            None => panic!("Toml::host({name:?}) before any trust rule"),
        }
        self
    }

    /// The table `[name]` with `body` (key lines) as its contents.
    pub fn section(self, name: &str, body: &str) -> Self {
        self.raw(&format!("[{name}]\n{body}"))
    }

    /// `[cache]` with `dir = path`; the directory is created by the proxy if missing.
    pub fn cache_dir(self, path: impl AsRef<Path>) -> Self {
        self.cache(path, "")
    }

    /// `[cache]` with `dir = path` followed by `keys` (more `[cache]` key lines).
    pub fn cache(self, path: impl AsRef<Path>, keys: &str) -> Self {
        let dir = path.as_ref().display().to_string();
        self.section("cache", &format!("dir = {dir:?}\n{keys}"))
    }

    /// `text` verbatim: any TOML the other methods do not cover.
    pub fn raw(mut self, text: &str) -> Self {
        self.parts.push(Part::Raw(text.to_string()));
        self
    }

    /// The config text.
    pub fn build(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Toml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Raw(text) => writeln!(f, "{}", text.trim_end())?,
                Part::Trust { cidr, ports, hosts } => {
                    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                    writeln!(f, "[[egress.trust]]\ncidrs = [{cidr:?}]")?;
                    writeln!(f, "ports = [{}]", ports.join(", "))?;
                    if !hosts.is_empty() {
                        let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
                        writeln!(f, "hosts = [{}]", hosts.join(", "))?;
                    }
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
