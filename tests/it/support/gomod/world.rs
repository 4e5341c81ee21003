//! The GOPROXY server and the checksum database on 127.0.0.1, with their knobs: a swapped
//! zip, a dropped record, a forged record, notes signed by another key.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;

use super::super::upstream::{Reply, Routes, Upstream};

use super::{GoModule, SumKey, escape, leaf, mth, percent_spellings, tile_path, tiles};

/// The knobs, and what the servers currently answer.
struct State {
    /// The modules as the database recorded them.
    modules: Vec<GoModule>,
    /// Every record, fillers included.
    records: Vec<String>,
    /// The record id of `modules[0]`.
    first_id: usize,
    key: SumKey,
    dropped: Vec<(String, String)>,
    /// Zips the proxy serves instead of the recorded ones.
    swapped: HashMap<(String, String), Vec<u8>>,
    /// Records the lookup answers (and the level-0 tile holds) instead of the real ones.
    forged: HashMap<(String, String), String>,
}

/// The GOPROXY server and the checksum database, both on 127.0.0.1.
pub struct GoWorld {
    pub proxy: Upstream,
    pub sumdb: Upstream,
    /// The key GOSUMDB (and fetchgate) trust.
    pub key: SumKey,
    proxy_routes: Routes,
    sumdb_routes: Routes,
    state: std::sync::Mutex<State>,
    /// The names the two servers are reached by over HTTPS (proxy, database), if they are.
    names: Option<(String, String)>,
}

impl GoWorld {
    /// Serves `modules`, with `filler` unrelated records logged before them (so proofs cross
    /// tiles: 300 gives a full and a partial level-0 tile and a level-1 tile).
    pub async fn start(modules: Vec<GoModule>, filler: usize) -> Self {
        Self::start_ordered(modules, filler, 0).await
    }

    /// Serves `modules` with `before` filler records logged before them and `after` after.
    pub async fn start_ordered(modules: Vec<GoModule>, before: usize, after: usize) -> Self {
        Self::start_over(modules, (before, after), None).await
    }

    /// [`GoWorld::start`] over HTTPS: both servers on `tls.0` (a loopback address), each
    /// presenting `tls.1`'s certificate, and [`GoWorld::goproxy`] and [`GoWorld::gosumdb`]
    /// naming them `https://<proxy name>:<port>` and `https://<sumdb name>:<port>`.
    pub async fn start_tls(
        modules: Vec<GoModule>,
        filler: usize,
        tls: (&str, Arc<rustls::ServerConfig>),
        names: (&str, &str),
    ) -> Self {
        let mut w = Self::start_over(modules, (filler, 0), Some(tls)).await;
        w.names = Some((names.0.to_string(), names.1.to_string()));
        w
    }

    /// Serves `modules` with `filler.0` records before them and `filler.1` after, over plain
    /// HTTP on 127.0.0.1 or with TLS on the address `tls` gives.
    async fn start_over(
        modules: Vec<GoModule>,
        (before, after): (usize, usize),
        tls: Option<(&str, Arc<rustls::ServerConfig>)>,
    ) -> Self {
        let key = SumKey::generate("sumdb.fetchgate.test");
        let filler = |i: usize| {
            GoModule::new(
                &format!("filler.test/m{i}"),
                "v1.0.0",
                &[("go.mod", "module x\n")],
            )
            .record()
        };
        let mut records: Vec<String> = (0..before).map(filler).collect();
        records.extend(modules.iter().map(GoModule::record));
        records.extend((before..before + after).map(filler));
        let proxy_routes: Routes = Default::default();
        let sumdb_routes: Routes = Default::default();
        let (bind, tls) = match tls {
            Some((ip, tls)) => (format!("{ip}:0"), Some(tls)),
            None => ("127.0.0.1:0".to_string(), None),
        };
        let proxy = Upstream::router_over(&bind, proxy_routes.clone(), tls.clone()).await;
        let sumdb = Upstream::router_over(&bind, sumdb_routes.clone(), tls).await;
        let state = State {
            modules,
            records,
            first_id: before,
            key: key.clone(),
            dropped: Vec::new(),
            swapped: HashMap::new(),
            forged: HashMap::new(),
        };
        let world = Self {
            proxy,
            sumdb,
            key,
            proxy_routes,
            sumdb_routes,
            state: std::sync::Mutex::new(state),
            names: None,
        };
        world.publish();
        world
    }

    /// `GOPROXY` for this world.
    pub fn goproxy(&self) -> String {
        match &self.names {
            Some((proxy, _)) => format!("https://{proxy}:{}", self.proxy.addr.port()),
            None => format!("http://{}", self.proxy.addr),
        }
    }

    /// The database's URL.
    pub fn sumdb_url(&self) -> String {
        match &self.names {
            Some((_, sumdb)) => format!("https://{sumdb}:{}", self.sumdb.addr.port()),
            None => format!("http://{}", self.sumdb.addr),
        }
    }

    /// `GOSUMDB` for this world: the verifier key and the database's URL.
    pub fn gosumdb(&self) -> String {
        format!("{} {}", self.key.verifier_key(), self.sumdb_url())
    }

    /// Rewrites every route from the current state.
    fn publish(&self) {
        let state = self.state.lock().unwrap();
        let mut proxy = HashMap::new();
        let mut versions: HashMap<&str, Vec<&str>> = HashMap::new();
        for m in &state.modules {
            let base = format!("/{}/@v/{}", escape(&m.path), escape(&m.version));
            let info = format!(
                "{{\"Version\":\"{}\",\"Time\":\"2026-01-01T00:00:00Z\"}}",
                m.version
            );
            proxy.insert(format!("{base}.info"), Reply::ok(info.clone()));
            proxy.insert(format!("{base}.mod"), Reply::ok(m.go_mod()));
            let key = (m.path.clone(), m.version.clone());
            let zip = state.swapped.get(&key).cloned().unwrap_or_else(|| m.zip());
            proxy.insert(format!("{base}.zip"), Reply::ok(zip));
            proxy.insert(format!("/{}/@latest", escape(&m.path)), Reply::ok(info));
            versions.entry(&m.path).or_default().push(&m.version);
        }
        for (path, vs) in versions {
            proxy.insert(
                format!("/{}/@v/list", escape(path)),
                Reply::ok(vs.join("\n") + "\n"),
            );
        }
        let leaves: Vec<[u8; 32]> = state.records.iter().map(|r| leaf(r.as_bytes())).collect();
        let tree = format!(
            "go.sum database tree\n{}\n{}\n",
            leaves.len(),
            STANDARD.encode(mth(&leaves))
        );
        let note = state.key.sign(&tree);
        let mut tiles = tiles(&leaves);
        let mut lookups = HashMap::new();
        for (i, m) in state.modules.iter().enumerate() {
            let key = (m.path.clone(), m.version.clone());
            if state.dropped.contains(&key) {
                continue;
            }
            let id = state.first_id + i;
            let record = match state.forged.get(&key) {
                None => state.records[id].clone(),
                Some(forged) => {
                    // Only the level-0 tile holding the record is rewritten: the signed tree
                    // and every other tile stay the real ones.
                    let width = (leaves.len() - id / 256 * 256).min(256);
                    let tile = tiles.get_mut(&tile_path(0, id / 256, width)).unwrap();
                    tile[id % 256 * 32..id % 256 * 32 + 32]
                        .copy_from_slice(&leaf(forged.as_bytes()));
                    forged.clone()
                }
            };
            lookups.insert(m.lookup_path(), format!("{id}\n{record}\n{note}"));
        }
        let mut sumdb: HashMap<String, Reply> = tiles
            .into_iter()
            .map(|(p, data)| (format!("/{p}"), Reply::ok(data)))
            .collect();
        sumdb.insert("/latest".into(), Reply::ok(note.clone()));
        for (path, body) in lookups {
            sumdb.insert(path, Reply::ok(body));
        }
        *self.proxy_routes.lock().unwrap() = percent_spellings(proxy);
        *self.sumdb_routes.lock().unwrap() = percent_spellings(sumdb);
    }

    /// Serves other files under the same module version (the database keeps the old hash).
    pub fn swap_zip(&self, path: &str, version: &str, files: &[(&str, &str)]) {
        let zip = GoModule::new(path, version, files).zip();
        let key = (path.to_string(), version.to_string());
        self.state.lock().unwrap().swapped.insert(key, zip);
        self.publish();
    }

    /// Serves other files under the same version, and a record for them that only the
    /// level-0 tile holding it vouches for (the signed tree, its other tiles and the tile above
    /// stay real): a forgery only a client that checks every tile against its parent refuses.
    pub fn forge_record_in_tile(&self, path: &str, version: &str, files: &[(&str, &str)]) {
        let forged = GoModule::new(path, version, files);
        let key = (path.to_string(), version.to_string());
        let mut state = self.state.lock().unwrap();
        state.swapped.insert(key.clone(), forged.zip());
        state.forged.insert(key, forged.record());
        drop(state);
        self.publish();
    }

    /// The database shows another history of the same size: its first record is replaced by
    /// another, and every tree note from now on (signed by the same key) is of that log.
    pub fn fork_log(&self) {
        self.state.lock().unwrap().records[0] = GoModule::new(
            "fork.test/other",
            "v1.0.0",
            &[("go.mod", "module fork.test/other\n")],
        )
        .record();
        self.publish();
    }

    /// The database forgets `path@version`: its lookup answers 404.
    pub fn drop_record(&self, path: &str, version: &str) {
        self.state
            .lock()
            .unwrap()
            .dropped
            .push((path.to_string(), version.to_string()));
        self.publish();
    }

    /// Every note from now on is signed by another key of the same name.
    pub fn sign_with_other_key(&self) {
        let name = self.key.name.clone();
        self.state.lock().unwrap().key = SumKey::generate(&name);
        self.publish();
    }

    /// Requests for `path` (exact, without query) on the proxy and the database together.
    pub fn requests(&self, path: &str) -> usize {
        let count = |u: &Upstream| {
            let asked =
                |s: &super::upstream::Seen| s.uri.split('?').next().map(|p| p.replace("%21", "!"));
            u.requests()
                .iter()
                .filter(|s| asked(s).as_deref() == Some(path))
                .count()
        };
        count(&self.proxy) + count(&self.sumdb)
    }

    /// Every path either server was asked for.
    pub fn paths(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .proxy
            .requests()
            .into_iter()
            .map(|s| format!("proxy {}", s.uri))
            .collect();
        all.extend(
            self.sumdb
                .requests()
                .into_iter()
                .map(|s| format!("sumdb {}", s.uri)),
        );
        all
    }

    /// A response body the database serves now (for a test that fetches through fetchgate).
    pub fn sumdb_body(&self, path: &str) -> Option<Bytes> {
        self.sumdb_routes
            .lock()
            .unwrap()
            .get(path)
            .map(|r| r.body.clone())
    }

    /// Serves `body` at `path` (escaped, as fetchgate asks) on the GOPROXY server instead of
    /// what the modules give, until the next change republishes them.
    pub fn serve_proxy(&self, path: &str, body: &str) {
        self.proxy_routes
            .lock()
            .unwrap()
            .insert(path.to_string(), Reply::ok(body.to_string()));
    }

    /// A response body the proxy serves now (for a test that fetches through fetchgate).
    pub fn proxy_body(&self, path: &str) -> Option<Bytes> {
        self.proxy_routes
            .lock()
            .unwrap()
            .get(path)
            .map(|r| r.body.clone())
    }
}
