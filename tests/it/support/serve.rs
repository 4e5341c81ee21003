//! The real `fetchgate serve` binary as a child process, with its log lines readable.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A running `fetchgate serve`.
pub struct Running {
    pub child: Child,
    /// Every standard-error line after the "listening" one (stderr is always drained, so the
    /// child never blocks on a full pipe).
    pub lines: mpsc::UnboundedReceiver<String>,
}

/// A port free on 127.0.0.1 at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A port on 127.0.0.1 that refuses every connection for as long as the returned socket
/// lives: bound but never listening, so no other test's server can take it meanwhile (a
/// port merely free at the time of asking can be handed to the next listener).
pub fn refused_port() -> (u16, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (port, socket)
}

/// Starts `fetchgate serve --config <config> <extra...>` and waits until it listens.
pub async fn start(config: &std::path::Path, extra: &[&str]) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(extra)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start fetchgate serve");
    let mut reader = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, lines) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(l)) = reader.next_line().await {
            let _ = tx.send(l);
        }
    });
    let mut running = Running { child, lines };
    running.wait_for("listening").await;
    running
}

impl Running {
    /// The next log line containing `needle`; lines before it are consumed.
    pub async fn wait_for(&mut self, needle: &str) -> String {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no log line containing {needle:?}"))
                .expect("serve is still running");
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The next log line.
    pub async fn next_line(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(20), self.lines.recv())
            .await
            .expect("a log line in time")
            .expect("serve is still running")
    }
}
