//! CONNECT tunnels: opaque bytes both ways, closed after an idle time-out. The two directions
//! are copied independently, so a side that stops reading stalls only the bytes headed to it;
//! either direction moving keeps the tunnel alive.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, copy_bidirectional_with_sizes};
use tokio::time::Instant;

/// Buffer per direction.
const BUF: usize = 16 * 1024;

/// Why a tunnel ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TunnelEnd {
    /// Both sides closed.
    Closed,
    /// Nothing moved for the idle time-out.
    Idle,
    /// A read or write failed.
    Error,
}

/// Copies between `a` and `b` until both directions close, an error occurs, or nothing moves
/// for `idle`. One side's end of stream shuts down the other's write side while the other
/// direction keeps flowing. Returns bytes a→b, b→a and how it ended.
pub(crate) async fn splice<A, B>(a: A, b: B, idle: Duration) -> (u64, u64, TunnelEnd)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let activity = Activity::new();
    let mut a = Watched::new(a, &activity);
    let mut b = Watched::new(b, &activity);
    let end = tokio::select! {
        copied = copy_bidirectional_with_sizes(&mut a, &mut b, BUF, BUF) => match copied {
            Ok(_) => TunnelEnd::Closed,
            Err(_) => TunnelEnd::Error,
        },
        () = activity.quiet_for(idle) => TunnelEnd::Idle,
    };
    (b.written, a.written, end)
}

/// When bytes last moved in either direction: the one idle timer both directions feed.
struct Activity {
    start: Instant,
    /// Nanoseconds from `start` to the last progress; atomic because both sides touch it.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let since = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(since, Ordering::Relaxed);
    }

    /// Resolves once nothing has moved for `idle`.
    async fn quiet_for(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_nanos(self.last.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// One side of a tunnel: counts the bytes written to it and reports every read or write
/// that made progress to the shared [`Activity`].
struct Watched<'a, T> {
    io: T,
    activity: &'a Activity,
    written: u64,
}

impl<'a, T> Watched<'a, T> {
    fn new(io: T, activity: &'a Activity) -> Self {
        Self {
            io,
            activity,
            written: 0,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<'_, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<'_, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            this.written += n as u64;
            this.activity.touch();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Passing on a half-close is a courtesy: if the peer is already gone, the other
        // direction may still have bytes to deliver, so a failed shutdown ends nothing.
        match Pin::new(&mut self.get_mut().io).poll_shutdown(cx) {
            Poll::Ready(Err(_)) => Poll::Ready(Ok(())),
            polled => polled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex, split};

    /// Far more than any test time-out allows, so only the outcome is asserted.
    const GENEROUS: Duration = Duration::from_secs(30);

    /// Ends of the pipes on both sides of a tunnel: what the client and the upstream hold.
    /// The small buffers stand in for socket buffers that fill when nobody reads.
    fn tunnel(
        idle: Duration,
    ) -> (
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
        tokio::task::JoinHandle<(u64, u64, TunnelEnd)>,
    ) {
        let (client, proxy_a) = duplex(4096);
        let (proxy_b, upstream) = duplex(4096);
        let spliced = tokio::spawn(splice(proxy_a, proxy_b, idle));
        (client, upstream, spliced)
    }

    #[tokio::test]
    async fn a_reader_that_stops_reading_stalls_only_its_own_direction() {
        let (client, upstream, _spliced) = tunnel(GENEROUS);
        let (mut client_r, mut client_w) = split(client);
        // The upstream never reads: everything the client sends piles up in the tunnel.
        let (_upstream_r, mut upstream_w) = split(upstream);
        tokio::spawn(async move {
            let chunk = vec![1u8; 64 * 1024];
            while client_w.write_all(&chunk).await.is_ok() {}
        });
        // Meanwhile the upstream's answer, many buffers long, still reaches the client.
        let answer: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
        let sent = answer.clone();
        tokio::spawn(async move { upstream_w.write_all(&sent).await });
        let mut got = vec![0u8; answer.len()];
        tokio::time::timeout(GENEROUS, client_r.read_exact(&mut got))
            .await
            .expect("the upstream-to-client direction was blocked by the stalled one")
            .unwrap();
        assert!(got == answer, "the answer arrived intact");
    }

    #[tokio::test]
    async fn one_sides_end_is_passed_on_while_the_other_direction_flows() {
        let (mut client, mut upstream, spliced) = tunnel(GENEROUS);
        client.write_all(b"hello").await.unwrap();
        client.shutdown().await.unwrap();
        // The upstream sees the end of the request only because the tunnel passed it on.
        let mut request = Vec::new();
        upstream.read_to_end(&mut request).await.unwrap();
        assert_eq!(request, b"hello");
        upstream.write_all(b"world!").await.unwrap();
        upstream.shutdown().await.unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"world!");
        let ended = tokio::time::timeout(GENEROUS, spliced).await.unwrap();
        assert_eq!(ended.unwrap(), (5, 6, TunnelEnd::Closed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_where_nothing_moves_ends_idle_and_keeps_its_counts() {
        let (mut client, mut upstream, spliced) = tunnel(Duration::from_secs(5));
        client.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        upstream.read_exact(&mut got).await.unwrap();
        assert_eq!(spliced.await.unwrap(), (4, 0, TunnelEnd::Idle));
        // The tunnel released both sides.
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_write_to_a_vanished_side_ends_in_error() {
        let (mut client, upstream, spliced) = tunnel(GENEROUS);
        drop(upstream);
        client.write_all(b"lost").await.unwrap();
        let ended = tokio::time::timeout(GENEROUS, spliced).await.unwrap();
        assert_eq!(ended.unwrap().2, TunnelEnd::Error);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_moving_keep_the_tunnel_open_past_the_idle_time_out() {
        let (mut client, mut upstream, spliced) = tunnel(Duration::from_secs(5));
        let mut byte = [0u8; 1];
        // Twelve seconds of a byte every three: never five seconds of silence.
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_secs(3)).await;
            upstream.write_all(b"x").await.unwrap();
            client.read_exact(&mut byte).await.unwrap();
        }
        assert_eq!(spliced.await.unwrap(), (0, 4, TunnelEnd::Idle));
    }
}
