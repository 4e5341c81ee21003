//! The limit column of `benches/tee.sh` and `benches/shared.sh`: what one of fetchgate's
//! streaming paths costs on one core with nothing but the work itself. One thread carries the
//! bytes over blocking sockets with reused buffers; no HTTP library, no runtime, no handoff
//! between threads on the way to the client. The scripts run it pinned to fetchgate's core in
//! the same rounds as fetchgate. Its CPU per byte is the least a design that hashes in user space spends; its
//! wall time could still be beaten by overlapping reads and writes, which one blocking thread
//! does not do, so fetchgate close to it (or past it) has no slack left in its own code.
//!
//! - `floor tee LISTEN UPSTREAM DIR`: a forward proxy for absolute-form
//!   `GET http://UPSTREAM/...` (any other destination is refused), one request per
//!   connection. Each body chunk is read once, hashed, written to the client and to a new
//!   preallocated file in DIR; at the end the file is `fsync`ed and renamed to its SHA-256
//!   and the directory `fsync`ed (a kept copy, as a fill publishes one).
//! - `floor tee-splice LISTEN UPSTREAM DIR`: the same with zero-copy forwarding: each chunk is
//!   `splice`d from the upstream socket into a pipe, `tee`d into a second pipe and `splice`d
//!   on to the client; only the second pipe's copy is read into memory, to hash it and write
//!   it to the file.
//! - `floor first-read LISTEN BUCKET MAP DIR COPY`: answers `GET /sha256/<hex>` on kept-alive
//!   client connections by reading the object from the S3 server at BUCKET over one kept-alive
//!   connection (MAP holds a presigned path per digest, one `<hex> <path>` a line). Each chunk
//!   is hashed and passed on; the last one is held until the digest and the size matched (a
//!   mismatch closes the connection short). COPY is the local copy: `none`, `behind` (a
//!   second thread writes, `fsync`s and renames each verified object after its response) or
//!   `unsynced` (the same without the two `fsync`s: a copy of bytes the bucket keeps, which
//!   fetchgate hashes again after a crash rather than syncing).
//!
//! The kept copies go to `DIR/kept`, made after DIR is marked as the top of a hierarchy
//! (`FS_TOPDIR_FL`, where the file system has it), as fetchgate's store places its own
//! directories (`src/store/placement.rs`): on ext4 their inodes then come from a block group of
//! their own rather than DIR's. `FLOOR_SPREAD=0` writes them into DIR itself instead.
//!
//! `FLOOR_CHUNK_KIB` sets the read size (256 KiB by default); `FLOOR_SOCKBUF_KIB` sets every
//! socket's send and receive buffers (the kernel's own sizing by default). Every address must
//! be a loopback one.

use std::collections::HashMap;
use std::error::Error;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use sha2::{Digest, Sha256};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Bytes read from a socket at a time, and the size of every reused buffer, unless
/// `FLOOR_CHUNK_KIB` says otherwise.
fn chunk_size() -> usize {
    std::env::var("FLOOR_CHUNK_KIB")
        .ok()
        .and_then(|k| k.parse::<usize>().ok())
        .filter(|k| *k > 0)
        .map_or(256 << 10, |k| k << 10)
}

/// How much of a body of which `left` bytes remain the next read asks for, into `buf`.
fn next_read(buf: &[u8], left: u64) -> usize {
    buf.len().min(usize::try_from(left).unwrap_or(usize::MAX))
}

/// The longest response or request head accepted.
const MAX_HEAD: usize = 64 << 10;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["tee", listen, upstream, dir] => tee(loopback(listen)?, loopback(upstream)?, dir, false),
        ["tee-splice", listen, upstream, dir] => {
            tee(loopback(listen)?, loopback(upstream)?, dir, true)
        }
        ["first-read", listen, bucket, map, dir, copy] => {
            let copy = match *copy {
                "none" => None,
                "behind" => Some(Synced::Yes),
                "unsynced" => Some(Synced::No),
                other => {
                    return Err(
                        format!("COPY is none, behind or unsynced, not {other:?}").into()
                    );
                }
            };
            first_read(loopback(listen)?, loopback(bucket)?, map, dir, copy)
        }
        // `cargo bench` runs every bench target with `--bench`: nothing to measure alone.
        ["--bench", ..] | [] => {
            eprintln!("floor: run by benches/tee.sh and benches/shared.sh (see the file's doc)");
            Ok(())
        }
        _ => Err("usage: floor tee|tee-splice LISTEN UPSTREAM DIR | floor first-read LISTEN BUCKET MAP DIR COPY".into()),
    }
}

/// `addr` as a socket address, refused unless it is a loopback one.
fn loopback(addr: &str) -> Result<SocketAddr> {
    let parsed: SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    if !parsed.ip().is_loopback() {
        return Err(format!("{addr} is not a loopback address").into());
    }
    Ok(parsed)
}

/// A socket with the bytes read past the last head kept for the body.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Conn {
    fn new(stream: TcpStream) -> Self {
        // Heads go out in one write each, and nothing waits on Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        // Socket buffers large enough that a write seldom waits for the peer's reads: the one
        // thread goes on reading and hashing while the kernel delivers what it wrote.
        if let Some(kib) = std::env::var("FLOOR_SOCKBUF_KIB")
            .ok()
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|k| *k > 0)
        {
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, kib << 10);
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&stream, kib << 10);
        }
        Self {
            stream,
            buf: vec![0; MAX_HEAD],
            start: 0,
            end: 0,
        }
    }

    /// The next head (up to its blank line) as text; `None` at a clean end of stream.
    fn head(&mut self) -> Result<Option<String>> {
        loop {
            let held = &self.buf[self.start..self.end];
            if let Some(at) = held.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8(held[..at].to_vec())?;
                self.start += at + 4;
                return Ok(Some(text));
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                return Err("head too long".into());
            }
            let n = self.stream.read(&mut self.buf[self.end..])?;
            if n == 0 {
                return if self.end == 0 {
                    Ok(None)
                } else {
                    Err("the peer closed inside a head".into())
                };
            }
            self.end += n;
        }
    }

    /// Reads up to `into.len()` body bytes (kept bytes first); 0 only at the end of stream.
    fn body(&mut self, into: &mut [u8]) -> Result<usize> {
        if self.start < self.end {
            let n = into.len().min(self.end - self.start);
            into[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
            return Ok(n);
        }
        Ok(self.stream.read(into)?)
    }
}

/// The value of header `name` in `head` (case-insensitive).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The response head's status code and `Content-Length`.
fn status_and_length(head: &str) -> Result<(u16, u64)> {
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status code")?;
    let length = header(head, "content-length")
        .and_then(|v| v.parse().ok())
        .ok_or("no Content-Length")?;
    Ok((status, length))
}

fn tee(listen: SocketAddr, upstream: SocketAddr, dir: &str, splice: bool) -> Result<()> {
    let listener = TcpListener::bind(listen)?;
    let dir = kept_dir(dir)?;
    let mut buf = vec![0u8; chunk_size()];
    for (n, client) in listener.incoming().enumerate() {
        if let Err(e) = tee_one(client?, upstream, &dir, n, &mut buf, splice) {
            eprintln!("floor tee: {e}");
        }
    }
    Ok(())
}

/// Relays one request's response, keeping the body under its digest in `dir`.
fn tee_one(
    client: TcpStream,
    upstream: SocketAddr,
    dir: &Path,
    n: usize,
    buf: &mut [u8],
    splice: bool,
) -> Result<()> {
    let mut client = Conn::new(client);
    let Some(head) = client.head()? else {
        // A readiness probe: connected and closed without asking anything.
        return Ok(());
    };
    let target = head.split_whitespace().nth(1).ok_or("no request target")?;
    let path = target
        .strip_prefix(&format!("http://{upstream}"))
        .filter(|p| p.starts_with('/'))
        .ok_or_else(|| format!("{target} is not on {upstream}"))?;
    let mut up = Conn::new(TcpStream::connect(upstream)?);
    up.stream.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {upstream}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let response = up.head()?.ok_or("no response")?;
    let (status, length) = status_and_length(&response)?;
    client.stream.write_all(
        format!("HTTP/1.1 {status} OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )?;
    let (temp, mut file) = new_file(dir, n, length)?;
    let mut hasher = Sha256::new();
    let mut left = length;
    // Body bytes read along with the head (all of them, when not splicing).
    while left > 0 && (!splice || up.start < up.end) {
        let want = next_read(buf, left);
        let got = up.body(&mut buf[..want])?;
        if got == 0 {
            return Err("the upstream body ended short".into());
        }
        let chunk = &buf[..got];
        hasher.update(chunk);
        client.stream.write_all(chunk)?;
        file.write_all(chunk)?;
        left -= got as u64;
    }
    if left > 0 {
        splice_body(
            &up.stream,
            &client.stream,
            left,
            buf,
            &mut hasher,
            &mut file,
        )?;
    }
    publish(file, &temp, &dir.join(hex::encode(hasher.finalize())))
}

/// Moves `left` body bytes from `up` to `client` through a pipe without copying them, and
/// reads a `tee` of each chunk into `buf` to hash it and write it to `file`.
fn splice_body(
    up: &TcpStream,
    client: &TcpStream,
    mut left: u64,
    buf: &mut [u8],
    hasher: &mut Sha256,
    file: &mut File,
) -> Result<()> {
    use rustix::pipe::{SpliceFlags, fcntl_setpipe_size, pipe, splice, tee};
    let (through_r, through_w) = pipe()?;
    let (copy_r, copy_w) = pipe()?;
    for end in [&through_r, &copy_r] {
        fcntl_setpipe_size(end, buf.len())?;
    }
    let mut copy_r = File::from(copy_r);
    let flags = SpliceFlags::MOVE | SpliceFlags::MORE;
    while left > 0 {
        let got = splice(up, None, &through_w, None, next_read(buf, left), flags)?;
        if got == 0 {
            return Err("the upstream body ended short".into());
        }
        let mut teed = 0;
        while teed < got {
            teed += tee(&through_r, &copy_w, got - teed, SpliceFlags::empty())?;
        }
        let mut sent = 0;
        while sent < got {
            sent += splice(&through_r, None, client, None, got - sent, flags)?;
        }
        copy_r.read_exact(&mut buf[..got])?;
        hasher.update(&buf[..got]);
        file.write_all(&buf[..got])?;
        left -= got as u64;
    }
    Ok(())
}

/// Where the kept copies go: `dir/kept`, made after `dir` was marked so that the file system
/// spreads the directories made in it (best effort), unless `FLOOR_SPREAD=0` says `dir`.
fn kept_dir(dir: &str) -> Result<PathBuf> {
    let dir = PathBuf::from(dir);
    if std::env::var("FLOOR_SPREAD").is_ok_and(|v| v == "0") {
        return Ok(dir);
    }
    if let Ok(handle) = File::open(&dir)
        && let Ok(flags) = rustix::fs::ioctl_getflags(&handle)
    {
        let _ = rustix::fs::ioctl_setflags(&handle, flags | rustix::fs::IFlags::TOPDIR);
    }
    let kept = dir.join("kept");
    std::fs::create_dir_all(&kept)?;
    Ok(kept)
}

/// A new file in `dir` (named for this process and `n`) with `len` bytes of blocks allocated:
/// writes land in allocated blocks, as a fill's do (it allocates a step at a time).
fn new_file(dir: &Path, n: usize, len: u64) -> Result<(PathBuf, File)> {
    let temp = dir.join(format!("tmp-{}-{n}", std::process::id()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    if len > 0 {
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len)?;
    }
    Ok((temp, file))
}

/// Whether a kept copy is `fsync`ed before and after its rename.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Synced {
    Yes,
    No,
}

/// `fsync`s `file`, renames `temp` to `target` and `fsync`s the directory: a kept copy.
fn publish(file: File, temp: &Path, target: &Path) -> Result<()> {
    publish_as(file, temp, target, Synced::Yes)
}

/// [`publish`], with the two `fsync`s only if `synced` says so.
fn publish_as(file: File, temp: &Path, target: &Path, synced: Synced) -> Result<()> {
    if synced == Synced::Yes {
        file.sync_all()?;
    }
    drop(file);
    std::fs::rename(temp, target)?;
    if synced == Synced::Yes
        && let Some(parent) = target.parent()
    {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// A verified object handed to the writer thread: its name and its chunks, each a whole
/// buffer and the length of it that holds bytes (the buffers go back to the pool once written).
struct Verified {
    hex: String,
    chunks: Vec<(Vec<u8>, usize)>,
}

fn first_read(
    listen: SocketAddr,
    bucket: SocketAddr,
    map: &str,
    dir: &str,
    copy: Option<Synced>,
) -> Result<()> {
    let paths: HashMap<String, String> = std::fs::read_to_string(map)?
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .collect();
    let chunk = chunk_size();
    let (pool_tx, pool_rx) = mpsc::channel::<Vec<u8>>();
    let kept = if copy.is_some() {
        kept_dir(dir)?
    } else {
        PathBuf::from(dir)
    };
    let writer = copy.map(|synced| {
        let (tx, rx) = mpsc::channel::<Verified>();
        let dir = kept.clone();
        let pool = pool_tx.clone();
        std::thread::spawn(move || {
            for (n, object) in rx.iter().enumerate() {
                if let Err(e) = keep(&dir, n, &object, synced) {
                    eprintln!("floor first-read: keeping {}: {e}", object.hex);
                }
                for (buffer, _) in object.chunks {
                    let _ = pool.send(buffer);
                }
            }
        });
        tx
    });
    let mut up = Conn::new(TcpStream::connect(bucket)?);
    let listener = TcpListener::bind(listen)?;
    for client in listener.incoming() {
        let mut client = Conn::new(client?);
        loop {
            let head = match client.head() {
                Ok(Some(head)) => head,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("floor first-read: {e}");
                    break;
                }
            };
            let served = serve_object(&head, &mut client, &mut up, bucket, &paths, || {
                pool_rx.try_recv().unwrap_or_else(|_| vec![0; chunk])
            });
            match served {
                Ok(Some(object)) => match &writer {
                    Some(w) => w.send(object)?,
                    None => object.chunks.into_iter().for_each(|(buffer, _)| {
                        let _ = pool_tx.send(buffer);
                    }),
                },
                Ok(None) => {
                    eprintln!("floor first-read: an object did not match its digest");
                    break;
                }
                Err(e) => {
                    // The bucket's connection may be mid-response: start a new one.
                    eprintln!("floor first-read: {e}");
                    up = Conn::new(TcpStream::connect(bucket)?);
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Serves one `GET /sha256/<hex>` from the bucket: the verified object (to keep), or `None`
/// when it did not verify (the client's response was cut short).
fn serve_object(
    head: &str,
    client: &mut Conn,
    up: &mut Conn,
    bucket: SocketAddr,
    paths: &HashMap<String, String>,
    mut buffer: impl FnMut() -> Vec<u8>,
) -> Result<Option<Verified>> {
    let hex = head
        .split_whitespace()
        .nth(1)
        .and_then(|t| t.strip_prefix("/sha256/"))
        .ok_or("not a GET /sha256/<hex>")?
        .to_string();
    let path = paths
        .get(&hex)
        .ok_or_else(|| format!("{hex} is not in MAP"))?;
    up.stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {bucket}\r\n\r\n").as_bytes())?;
    let response = up.head()?.ok_or("the bucket closed")?;
    let (status, length) = status_and_length(&response)?;
    if status != 200 {
        return Err(format!("the bucket answered {status} for {hex}").into());
    }
    client
        .stream
        .write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n").as_bytes())?;
    let mut hasher = Sha256::new();
    let mut chunks: Vec<(Vec<u8>, usize)> = Vec::new();
    let mut left = length;
    while left > 0 {
        let mut chunk = buffer();
        let want = next_read(&chunk, left);
        let got = up.body(&mut chunk[..want])?;
        if got == 0 {
            return Err("the bucket's body ended short".into());
        }
        hasher.update(&chunk[..got]);
        left -= got as u64;
        if left > 0 {
            client.stream.write_all(&chunk[..got])?;
        }
        chunks.push((chunk, got));
    }
    if hex::encode(hasher.finalize()) != hex {
        return Ok(None);
    }
    if let Some((last, len)) = chunks.last() {
        client.stream.write_all(&last[..*len])?;
    }
    Ok(Some(Verified { hex, chunks }))
}

/// Writes a verified object to a new file and publishes it under its digest.
fn keep(dir: &Path, n: usize, object: &Verified, synced: Synced) -> Result<()> {
    let size = object.chunks.iter().map(|(_, len)| *len as u64).sum();
    let (temp, mut file) = new_file(dir, n, size)?;
    for (buffer, len) in &object.chunks {
        file.write_all(&buffer[..*len])?;
    }
    publish_as(file, &temp, &dir.join(&object.hex), synced)
}
