//! The real `fetchgate serve` binary as a child process, with its log lines readable. Its
//! config should listen on `127.0.0.1:0` (proxy and admin): the addresses it bound are read
//! back from its "fetchgate listening" line, so no port is picked ahead and raced for.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A running `fetchgate serve`.
pub struct Running {
    pub child: Child,
    /// The proxy listener's bound address, as its "fetchgate listening" line says.
    pub proxy: SocketAddr,
    /// The admin listener's bound address, from the same line.
    pub admin: SocketAddr,
    /// Each `[[registry]] listen` address bound, by registry name, from the same line.
    pub mounts: Vec<(String, SocketAddr)>,
    /// Every standard-error line after the "listening" one (stderr is always drained, so the
    /// child never blocks on a full pipe).
    pub lines: mpsc::UnboundedReceiver<String>,
}

/// `[listen]` with the proxy and admin listeners on ephemeral loopback ports; [`start`] reads
/// the ports bound back from the log.
pub const LISTEN_EPHEMERAL: &str = "proxy = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"";

/// A port on 127.0.0.1 that refuses every connection for as long as the returned socket
/// lives: bound but never listening, so no other test's server can take it meanwhile (a
/// port merely free at the time of asking can be handed to the next listener).
pub fn refused_port() -> (u16, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (port, socket)
}

/// Starts `fetchgate serve --config <config> <extra...>`, waits until it listens and reads
/// the addresses it bound from that line.
pub async fn start(config: &std::path::Path, extra: &[&str]) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(extra)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start fetchgate serve");
    let mut reader = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, mut lines) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(l)) = reader.next_line().await {
            let _ = tx.send(l);
        }
    });
    // A child that never says it listens is killed when this panics (`kill_on_drop`).
    let line = next_containing(&mut lines, "fetchgate listening").await;
    Running {
        child,
        proxy: bound(&line, "proxy"),
        admin: bound(&line, "admin"),
        mounts: registries(&line),
        lines,
    }
}

/// The address after `field` in the listening line, in the text form (`proxy=127.0.0.1:1`) or
/// the JSON one (`"proxy":"127.0.0.1:1"`).
fn bound(line: &str, field: &str) -> SocketAddr {
    let text = format!("{field}=");
    let json = format!("\"{field}\":\"");
    let at = line
        .find(&text)
        .map(|i| i + text.len())
        .or_else(|| line.find(&json).map(|i| i + json.len()))
        .unwrap_or_else(|| panic!("no {field} address in the listening line: {line}"));
    let rest = &line[at..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|e| panic!("{field} address in {line:?}: {e}"))
}

/// The `registries` field of the listening line: `name=address`, comma-separated.
fn registries(line: &str) -> Vec<(String, SocketAddr)> {
    let at = line
        .find("registries=")
        .map(|i| i + "registries=".len())
        .or_else(|| {
            line.find("\"registries\":\"")
                .map(|i| i + "\"registries\":\"".len())
        });
    let Some(at) = at else { return Vec::new() };
    let rest = &line[at..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '"')
        .unwrap_or(rest.len());
    rest[..end]
        .split(',')
        .filter_map(|pair| {
            let (name, addr) = pair.split_once('=')?;
            Some((name.to_string(), addr.parse().ok()?))
        })
        .collect()
}

/// The next line from `lines` containing `needle`; lines before it are consumed.
async fn next_containing(lines: &mut mpsc::UnboundedReceiver<String>, needle: &str) -> String {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.recv())
            .await
            .unwrap_or_else(|_| panic!("no log line containing {needle:?}"))
            .expect("serve is still running");
        if line.contains(needle) {
            return line;
        }
    }
}

/// The ports of a killed `fetchgate serve`, held (see [`super::ports`]) until it starts again on
/// the same addresses: no other test's listener is given them in between.
pub struct HeldPorts {
    /// The proxy address it had.
    pub proxy: SocketAddr,
    /// The admin address it had.
    pub admin: SocketAddr,
    _holds: [super::ports::Hold; 2],
}

impl HeldPorts {
    /// `[listen]` naming the held addresses, for the config of the restart.
    pub fn listen(&self) -> String {
        format!("proxy = \"{}\"\nadmin = \"{}\"", self.proxy, self.admin)
    }
}

impl Running {
    /// Kills the child (`SIGKILL`), waits for it, and holds its two ports for a restart on
    /// the same addresses (a client configured with the proxy's address, such as apt, keeps
    /// its state). Drop the result once the restart listens.
    pub async fn kill_holding_ports(mut self) -> HeldPorts {
        self.child.kill().await.expect("kill fetchgate serve");
        let _ = self.child.wait().await;
        let (proxy, admin) = (self.proxy, self.admin);
        let holds = tokio::task::spawn_blocking(move || {
            [
                super::ports::hold_once_refused(proxy),
                super::ports::hold_once_refused(admin),
            ]
        })
        .await
        .expect("hold the ports");
        HeldPorts {
            proxy,
            admin,
            _holds: holds,
        }
    }

    /// Sends `SIGTERM` (the graceful stop), waits up to 30 s for the child to exit, and
    /// asserts it exited 0.
    pub async fn stop_gracefully(&mut self) {
        let pid = self.child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("fetchgate serve exited within 30 s of SIGTERM")
            .expect("wait for fetchgate serve");
        assert!(status.success(), "{status:?}");
    }

    /// The next log line containing `needle`; lines before it are consumed.
    pub async fn wait_for(&mut self, needle: &str) -> String {
        next_containing(&mut self.lines, needle).await
    }

    /// The next log line.
    pub async fn next_line(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(20), self.lines.recv())
            .await
            .expect("a log line in time")
            .expect("serve is still running")
    }
}
