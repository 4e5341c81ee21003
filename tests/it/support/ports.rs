//! Ports held while their server is down: a socket bound with `SO_REUSEADDR` and not listening
//! refuses every connection, and the kernel gives its port to no port-0 bind, while a listener
//! that sets `SO_REUSEADDR` itself (std's, tokio's and Go's all do) can still bind beside it.
//! So a server can stop and start again on the same address without another test's listener
//! being handed the port in between.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rustix::fd::OwnedFd;

/// A port held for a server that is not listening on it now.
pub struct Hold {
    /// The address held.
    pub addr: SocketAddr,
    _fd: OwnedFd,
}

/// Holds `addr`; fails while something listens on it.
pub fn hold(addr: SocketAddr) -> std::io::Result<Hold> {
    use rustix::net::{AddressFamily, SocketType, bind, socket, sockopt};
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = socket(family, SocketType::STREAM, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    bind(&fd, &addr)?;
    Ok(Hold { addr, _fd: fd })
}

/// Holds a port the kernel picks on `ip`: for a program that must be told its ports ahead and
/// cannot bind port 0 and say which it got. The program binds beside the hold; drop the hold
/// once it listens.
pub fn hold_new(ip: [u8; 4]) -> Hold {
    let held = hold(SocketAddr::from((ip, 0))).expect("bind a port to hold");
    let addr = rustix::net::getsockname(&held._fd)
        .ok()
        .and_then(|a| SocketAddr::try_from(a).ok())
        .expect("the held port's address");
    Hold { addr, ..held }
}

/// Waits (up to 10 s) until nothing accepts on `addr` any more, then holds it. A child process
/// another test forked while the listener was open keeps a copy of it until it execs
/// (close-on-exec drops it there), so a stopped listener can outlive its server by a moment.
pub fn hold_once_refused(addr: SocketAddr) -> Hold {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let refused = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err();
        if refused && let Ok(held) = hold(addr) {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "{addr} still accepts connections (or cannot be held) 10 s after its server stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
