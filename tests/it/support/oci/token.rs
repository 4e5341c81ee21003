//! A token server for distribution's token auth, run in the test process on 127.0.0.1: it
//! answers `GET /token?service=..&scope=..` with a JWT granting exactly the scopes asked for,
//! signed ES256 by a key whose self-signed rcgen certificate the registry trusts
//! (`rootcertbundle`).
//!
//! distribution 2.8 (`registry/auth/token/token.go`, `VerifySigningKey`) finds the signing key
//! from the JWT header's `x5c` (a chain verified against `rootcertbundle`), else `jwk`, else
//! `kid` (a libtrust fingerprint of a root's key); a token with none is refused. This server
//! sends `x5c` with its one certificate. The claims it checks: `iss` = the configured issuer,
//! `aud` = the service, `exp`/`nbf` with 60 s leeway, and `access` holding every action the
//! request needs.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::json;

use super::registry::TokenAuth;

/// The `service` the test registry names in its challenges.
pub const SERVICE: &str = "fetchgate-test-registry";
/// The issuer the test registry trusts.
pub const ISSUER: &str = "fetchgate-test-token-issuer";

/// A key and its self-signed certificate, signing registry JWTs.
pub struct TokenSigner {
    key: ring::signature::EcdsaKeyPair,
    cert_der: Vec<u8>,
    /// The certificate in PEM, for `rootcertbundle`.
    pub cert_pem: String,
}

impl TokenSigner {
    /// A fresh P-256 key and certificate.
    pub fn new() -> Self {
        let key = rcgen::KeyPair::generate().expect("token key");
        let params = rcgen::CertificateParams::new(vec!["fetchgate-test-token-signer".into()])
            .expect("token cert params");
        let cert = params.self_signed(&key).expect("token cert");
        let rng = ring::rand::SystemRandom::new();
        let key = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &key.serialize_der(),
            &rng,
        )
        .expect("token key for ring");
        Self {
            key,
            cert_der: cert.der().to_vec(),
            cert_pem: cert.pem(),
        }
    }

    /// A JWT from `issuer` for `audience` granting `access` (`(type, name, actions)`), valid
    /// for `ttl` from now.
    pub fn token(
        &self,
        issuer: &str,
        audience: &str,
        access: &[(String, String, Vec<String>)],
        ttl: Duration,
    ) -> String {
        let now = unix_now();
        let header =
            json!({"typ": "JWT", "alg": "ES256", "x5c": [STANDARD.encode(&self.cert_der)]});
        let claims = json!({
            "iss": issuer,
            "sub": "fetchgate-test",
            "aud": audience,
            "exp": now + ttl.as_secs(),
            "nbf": now.saturating_sub(1),
            "iat": now,
            "jti": format!("{now}-{}", rand_u64()),
            "access": access.iter().map(|(t, n, a)| json!({"type": t, "name": n, "actions": a})).collect::<Vec<_>>(),
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = ring::rand::SystemRandom::new();
        let sig = self
            .key
            .sign(&rng, signing_input.as_bytes())
            .expect("sign the token");
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }
}

impl Default for TokenSigner {
    fn default() -> Self {
        Self::new()
    }
}

/// One request the token server received.
#[derive(Clone, Debug)]
pub struct TokenRequest {
    /// The request target with its query (`/token?service=...&scope=...`).
    pub target: String,
    /// Its `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// A running token server.
pub struct TokenServer {
    /// Where it listens.
    pub addr: SocketAddr,
    signer: Arc<TokenSigner>,
    seen: Arc<Mutex<Vec<TokenRequest>>>,
    stop: Arc<AtomicBool>,
}

/// How the token server answers.
#[derive(Clone, Debug)]
pub struct TokenPolicy {
    /// `Some((user, password))`: a request without this Basic credential gets `401`.
    pub basic: Option<(String, String)>,
    /// The `expires_in` it announces (and the tokens' lifetime).
    pub expires_in: Duration,
}

impl Default for TokenPolicy {
    fn default() -> Self {
        Self {
            basic: None,
            expires_in: Duration::from_secs(300),
        }
    }
}

impl TokenServer {
    /// Starts a server on 127.0.0.1 (its own thread, so blocking tests do not stall it).
    pub fn start(policy: TokenPolicy) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the token server");
        let addr = listener.local_addr().expect("token server address");
        let signer = Arc::new(TokenSigner::new());
        let seen: Arc<Mutex<Vec<TokenRequest>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, v, st) = (signer.clone(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (s, v, p) = (s.clone(), v.clone(), policy.clone());
                std::thread::spawn(move || answer(conn, &s, &v, &p));
            }
        });
        Self {
            addr,
            signer,
            seen,
            stop,
        }
    }

    /// `http://127.0.0.1:<port>/token`.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// The registry settings that trust this server's tokens.
    pub fn auth(&self) -> TokenAuth {
        TokenAuth {
            realm: self.realm(),
            service: SERVICE.into(),
            issuer: ISSUER.into(),
            root_cert_pem: self.signer.cert_pem.clone(),
        }
    }

    /// A valid token for `actions` (e.g. `["pull"]`) on repository `name`, as the server
    /// would issue it.
    pub fn token_for(&self, name: &str, actions: &[&str]) -> String {
        let access = vec![(
            "repository".to_string(),
            name.to_string(),
            actions.iter().map(|a| a.to_string()).collect(),
        )];
        self.signer
            .token(ISSUER, SERVICE, &access, Duration::from_secs(300))
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<TokenRequest> {
        self.seen.lock().expect("token log").clone()
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Answers one connection: one request, then close.
fn answer(
    mut conn: TcpStream,
    signer: &TokenSigner,
    seen: &Mutex<Vec<TokenRequest>>,
    policy: &TokenPolicy,
) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let target = line.split(' ').nth(1).unwrap_or("").to_string();
    let mut authorization = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':')
            && n.trim().eq_ignore_ascii_case("authorization")
        {
            authorization = Some(v.trim().to_string());
        }
    }
    seen.lock().expect("token log").push(TokenRequest {
        target: target.clone(),
        authorization: authorization.clone(),
    });
    let (status, body) = reply(&target, authorization.as_deref(), signer, policy);
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The status line tail and JSON body for one token request.
fn reply(
    target: &str,
    authorization: Option<&str>,
    signer: &TokenSigner,
    policy: &TokenPolicy,
) -> (&'static str, String) {
    let Ok(url) = url::Url::parse(&format!("http://token.invalid{target}")) else {
        return ("400 Bad Request", r#"{"details":"bad target"}"#.into());
    };
    if url.path() != "/token" {
        return ("404 Not Found", r#"{"details":"only /token"}"#.into());
    }
    if let Some((user, pass)) = &policy.basic {
        let want = format!("Basic {}", STANDARD.encode(format!("{user}:{pass}")));
        if authorization != Some(want.as_str()) {
            return (
                "401 Unauthorized",
                r#"{"details":"credentials required"}"#.into(),
            );
        }
    }
    let mut service = String::new();
    let mut access = Vec::new();
    for (k, v) in url.query_pairs() {
        match &*k {
            "service" => service = v.into_owned(),
            "scope" => {
                // `repository:<name>:<action,action>`; names hold no `:`.
                let mut parts = v.splitn(3, ':');
                if let (Some(t), Some(n), Some(a)) = (parts.next(), parts.next(), parts.next()) {
                    access.push((
                        t.to_string(),
                        n.to_string(),
                        a.split(',').map(str::to_string).collect(),
                    ));
                }
            }
            _ => {}
        }
    }
    let token = signer.token(ISSUER, &service, &access, policy.expires_in);
    let body = json!({
        "token": token,
        "access_token": token,
        "expires_in": policy.expires_in.as_secs(),
        "issued_at": rfc3339(unix_now()),
    });
    ("200 OK", body.to_string())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("random");
    u64::from_le_bytes(b)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time (civil-from-days, proleptic Gregorian).
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
