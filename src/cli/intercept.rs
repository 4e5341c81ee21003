//! `fetchgate intercept ca`: a new intercept CA, name-constrained to the hosts it is for, its
//! key written owner-only, and the line each client needs to trust it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::failure::CliError;
use crate::listen::intercept::new_ca;

/// Writes `intercept-ca.pem` and `intercept-ca.key` (mode 0600) into `dir` for `hosts`, valid
/// for `days`; never over existing files. Prints the `[intercept]` table and the trust lines.
pub fn run(dir: &Path, hosts: &[String], days: u32, json: bool) -> Result<ExitCode, CliError> {
    if !(1..=3650).contains(&days) {
        return Err(CliError::argument("--days must be from 1 to 3650"));
    }
    let (cert, key) = new_ca(hosts, days).map_err(|e| CliError::argument(e.to_string()))?;
    let cert_path = dir.join("intercept-ca.pem");
    let key_path = dir.join("intercept-ca.key");
    for p in [&cert_path, &key_path] {
        if p.exists() {
            return Err(CliError::argument(format!(
                "{} exists; move it away or choose another --dir (an intercept CA is never overwritten)",
                p.display()
            )));
        }
    }
    write_new(&key_path, key.as_bytes(), 0o600)?;
    write_new(&cert_path, cert.as_bytes(), 0o644)?;
    let ca = cert_path.display().to_string();
    let trust = [
        ("node, npm", format!("export NODE_EXTRA_CA_CERTS={ca}")),
        ("pip", format!("export PIP_CERT={ca}")),
        ("requests, uv", format!("export REQUESTS_CA_BUNDLE={ca}")),
        ("cargo", format!("export CARGO_HTTP_CAINFO={ca}")),
        (
            "go, skopeo",
            format!(
                "export SSL_CERT_FILE={ca}  # replaces the system roots: use a bundle holding both"
            ),
        ),
        ("apt", format!("Acquire::https::CaInfo \"{ca}\";")),
        (
            "system bundle (Debian)",
            format!(
                "cp {ca} /usr/local/share/ca-certificates/fetchgate-intercept.crt && update-ca-certificates"
            ),
        ),
    ];
    let table = format!(
        "[intercept]\nca_cert = {:?}\nca_key = {:?}\nhosts = {:?}\n",
        ca,
        key_path.display().to_string(),
        hosts
    );
    if json {
        let lines: serde_json::Map<String, serde_json::Value> = trust
            .iter()
            .map(|(c, l)| ((*c).to_string(), json!(l)))
            .collect();
        println!(
            "{}",
            json!({ "ca_cert": ca, "ca_key": key_path.display().to_string(), "hosts": hosts, "config": table, "trust": lines })
        );
    } else {
        println!("wrote {ca} and {} (mode 0600)\n", key_path.display());
        println!("# fetchgate.toml\n{table}");
        println!("# each client trusts the CA:");
        for (client, line) in trust {
            println!("#   {client}:\n{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Creates `path` (never over an existing file) with `mode` and writes `bytes`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CliError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| {
            CliError::new(
                "command_failed",
                format!("cannot create {}: {e}", path.display()),
            )
        })?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(|e| {
        CliError::new(
            "command_failed",
            format!("cannot write {}: {e}", path.display()),
        )
    })
}
