//! CONNECT tunnels: opaque bytes both ways, closed after an idle time-out.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// Buffer per direction.
const BUF: usize = 16 * 1024;

/// Why a tunnel ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelEnd {
    /// Both sides closed.
    Closed,
    /// Nothing moved for the idle time-out.
    Idle,
    /// A read or write failed.
    Error,
}

/// Copies between `a` and `b` until both directions close, an error occurs, or nothing moves
/// for `idle`. Returns bytes a→b, b→a and how it ended.
pub async fn splice<A, B>(a: A, b: B, idle: Duration) -> (u64, u64, TunnelEnd)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut ar, mut aw) = tokio::io::split(a);
    let (mut br, mut bw) = tokio::io::split(b);
    let mut buf_a = vec![0u8; BUF];
    let mut buf_b = vec![0u8; BUF];
    let (mut up, mut down) = (0u64, 0u64);
    let (mut a_open, mut b_open) = (true, true);
    let deadline = tokio::time::sleep(idle);
    tokio::pin!(deadline);
    let end = loop {
        if !a_open && !b_open {
            break TunnelEnd::Closed;
        }
        tokio::select! {
            r = ar.read(&mut buf_a), if a_open => match r {
                Ok(0) => { a_open = false; let _ = bw.shutdown().await; }
                Ok(n) => {
                    if bw.write_all(&buf_a[..n]).await.is_err() { break TunnelEnd::Error; }
                    up += n as u64;
                    deadline.as_mut().reset(Instant::now() + idle);
                }
                Err(_) => break TunnelEnd::Error,
            },
            r = br.read(&mut buf_b), if b_open => match r {
                Ok(0) => { b_open = false; let _ = aw.shutdown().await; }
                Ok(n) => {
                    if aw.write_all(&buf_b[..n]).await.is_err() { break TunnelEnd::Error; }
                    down += n as u64;
                    deadline.as_mut().reset(Instant::now() + idle);
                }
                Err(_) => break TunnelEnd::Error,
            },
            _ = &mut deadline => break TunnelEnd::Idle,
        }
    };
    (up, down, end)
}
