//! Hostile Agent Packages refused by code and never published; HTML character references,
//! undecodable text and IPv6 literals refused, and their harmless twins published.

use crate::support;

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::tarball::{Member, tgz};

use super::{agent_declared, agent_files, agent_tgz};
use crate::packs::Site;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_agent_packages_are_refused_by_code_and_never_published() {
    let site = Site::start("").await;
    let gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    type Case = (&'static str, Vec<(String, Vec<u8>)>, &'static str);
    let with = |name: &str, path: &str, bytes: Vec<u8>| {
        let mut f = agent_files(name);
        f.retain(|(p, _)| p != path);
        f.push((path.to_string(), bytes));
        f
    };
    let cases: Vec<Case> = vec![
        (
            "bidi-md",
            with(
                "bidi-md",
                "skills/triage/SKILL.md",
                "# T\n\nok\nif admin \u{202E} }".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "zero-width",
            with(
                "zero-width",
                "skills/triage/SKILL.md",
                "a\u{200B}b\n".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "tag-block",
            with(
                "tag-block",
                "skills/triage/references/notes.json",
                "{\"x\":\"\u{E0041}\"}".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            // No hidden character in the bytes; the harness's YAML reader decodes one.
            "front-matter-escape",
            with(
                "front-matter-escape",
                "skills/triage/SKILL.md",
                b"---\nname: triage\ndescription: \"Sort the queue \\u202e politely\"\n---\n# Triage\n".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "bom-then-bidi",
            with(
                "bom-then-bidi",
                "net.agentdoc.package/NOT.md",
                "\u{FEFF}a\r\n\u{2067}b".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "utf16-md",
            with(
                "utf16-md",
                "skills/triage/SKILL.md",
                vec![0xFF, 0xFE, b'#', 0, 0x2E, 0x20],
            ),
            "pack_text_encoding",
        ),
        (
            "invalid-utf8-md",
            with(
                "invalid-utf8-md",
                "skills/triage/SKILL.md",
                vec![b'#', b'\n', 0xC0, 0xAF],
            ),
            "pack_text_encoding",
        ),
        (
            "private-key",
            with(
                "private-key",
                "skills/triage/scripts/key.pem",
                b"-----BEGIN EC PRIVATE KEY-----\nMHcC\n".to_vec(),
            ),
            "pack_credential_found",
        ),
        (
            "key-in-a-binary-file",
            with(
                "key-in-a-binary-file",
                "assets/logo.png",
                [
                    &[0x89u8, b'P', b'N', b'G', 0, 0xff][..],
                    b"-----BEGIN PRIVATE KEY-----\nMIIE",
                ]
                .concat(),
            ),
            "pack_credential_found",
        ),
        (
            "token",
            with(
                "token",
                "skills/triage/scripts/run.py",
                format!("TOKEN = '{gh}'\n").into_bytes(),
            ),
            "pack_credential_found",
        ),
        (
            "split-token",
            with(
                "split-token",
                "skills/triage/scripts/run.py",
                format!("T = '{}\\\n  {}'\n", &gh[..15], &gh[15..]).into_bytes(),
            ),
            "pack_credential_found",
        ),
        (
            "bidi-in-a-file-name",
            with(
                "bidi-in-a-file-name",
                "skills/triage/references/evil\u{202E}dm.txt",
                b"plain".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "json-escaped-bidi",
            with(
                "json-escaped-bidi",
                "skills/triage/references/notes.json",
                br#"{"refusals":["never \u202e delete"]}"#.to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "markdown-reference",
            with(
                "markdown-reference",
                "skills/triage/SKILL.md",
                b"# T\n\nadmin &#x202E; check\n".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "name-mismatch",
            with(
                "name-mismatch",
                "plugin.json",
                br#"{"name":"someone-else"}"#.to_vec(),
            ),
            "pack_identity_mismatch",
        ),
        (
            "descriptor-digest",
            with(
                "descriptor-digest",
                "descriptor.json",
                br#"{"offerings":[1]}"#.to_vec(),
            ),
            "pack_integrity_failure",
        ),
    ];
    for (name, files, code) in cases {
        site.assert_agent_refused(name, &files, code).await;
    }
    let base = |name: &str| agent_tgz(name, &agent_files(name));
    type Tweak<'t> = &'t dyn Fn(&mut Value);
    let archive_cases: Vec<(&str, Vec<u8>, Tweak<'_>, &str)> = vec![
        (
            "record-mismatch",
            base("record-mismatch"),
            &|d| {
                d["build_record"]["package"]["sha256"] = json!(Digest::of(b"other").hex());
                d["archive"]["sha256"] = d["build_record"]["package"]["sha256"].clone();
            },
            "pack_integrity_failure",
        ),
        (
            "no-build-record",
            base("no-build-record"),
            &|d| {
                d.as_object_mut().unwrap().remove("build_record");
            },
            "pack_build_record_missing",
        ),
        (
            "symlink",
            tgz(&[
                Member::dir("symlink/"),
                Member::file("symlink/plugin.json", r#"{"name":"symlink"}"#),
                Member::symlink("symlink/x.md", "/etc/passwd"),
            ]),
            &|_| {},
            "archive_member_type",
        ),
        (
            "traversal",
            tgz(&[
                Member::file("plugin.json", r#"{"name":"traversal"}"#),
                Member::file("../evil.md", "x"),
            ]),
            &|_| {},
            "archive_path",
        ),
    ];
    for (name, archive, tweak, code) in archive_cases {
        site.depot(name, &archive, tweak);
        let got = site.agent(name, &[]).await;
        site.assert_refused_unpublished(name, &got, &archive, code)
            .await;
    }
}

/// UTF-16LE bytes of `s`, with no byte-order mark.
fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Items 10, 11 and 12: character references a browser decodes (the whole HTML5 table, and
/// numeric references without `;`), text that cannot be decoded and checked (UTF-16 without a
/// byte-order mark, a NUL in a text file), and an IPv6 literal in the install file are
/// refused and never published. Their twins, text an HTML reader shows as ordinary
/// characters, binary files, and system names with colons, are published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_references_undecodable_text_and_ipv6_literals_are_refused_and_twins_published() {
    let site = Site::start("").await;
    let with = |name: &str, path: &str, bytes: Vec<u8>| {
        let mut f = agent_files(name);
        f.retain(|(p, _)| p != path);
        f.push((path.to_string(), bytes));
        f
    };
    let md =
        |name: &str, text: &str| with(name, "skills/triage/SKILL.md", text.as_bytes().to_vec());
    let install = |name: &str, install: &str| {
        agent_declared(
            name,
            br#"{"offerings":[]}"#,
            Some(install.as_bytes()),
            json!({}),
        )
    };
    type Files = Vec<(String, Vec<u8>)>;
    type Case = (&'static str, Files, &'static str);
    let cases: Vec<Case> = vec![
        (
            "nvts",
            md("nvts", "# T\n\nok&NegativeVeryThinSpace;x\n"),
            "pack_hidden_character",
        ),
        (
            "nmsp",
            md("nmsp", "a&NegativeMediumSpace;b\n"),
            "pack_hidden_character",
        ),
        (
            "nthk",
            md("nthk", "a&NegativeThickSpace;b\n"),
            "pack_hidden_character",
        ),
        (
            "nthn",
            md("nthn", "a&NegativeThinSpace;b\n"),
            "pack_hidden_character",
        ),
        ("it", md("it", "x&it;y\n"), "pack_hidden_character"),
        ("ic", md("ic", "x&ic;y\n"), "pack_hidden_character"),
        ("af", md("af", "f&af;x\n"), "pack_hidden_character"),
        (
            "numeric-no-semicolon",
            md("numeric-no-semicolon", "if admin &#x202E then\n"),
            "pack_hidden_character",
        ),
        (
            "decimal-no-semicolon",
            md("decimal-no-semicolon", "x &#8207 y\n"),
            "pack_hidden_character",
        ),
        (
            "html-page",
            with(
                "html-page",
                "docs/index.html",
                b"<p>pay &#8238;gpj.exe</p>\n".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "utf16-no-bom-named",
            with(
                "utf16-no-bom-named",
                "skills/triage/SKILL.md",
                utf16le("# T\nif admin \u{202E} }\n"),
            ),
            "pack_text_encoding",
        ),
        (
            "utf16-no-bom-unnamed",
            with(
                "utf16-no-bom-unnamed",
                "skills/triage/NOTES",
                utf16le("plain words \u{202E} more words\n"),
            ),
            "pack_text_encoding",
        ),
        (
            "nul-in-text",
            with(
                "nul-in-text",
                "skills/triage/SKILL.md",
                b"# T\n\nhidden\0after\n".to_vec(),
            ),
            "pack_text_encoding",
        ),
        (
            "ipv6-in-install",
            install(
                "ipv6-in-install",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","kind":"service","host":"2001:db8::7"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
        (
            "ipv6-bracketed",
            install(
                "ipv6-bracketed",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","note":"reach it at [fe80::1%eth0]:8443"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
        (
            "ipv6-mapped",
            install(
                "ipv6-mapped",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","host":"::ffff:10.0.0.7"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
        (
            "ipv6-loopback",
            install(
                "ipv6-loopback",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","host":"::1"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
    ];
    for (name, files, code) in cases {
        site.assert_agent_refused(name, &files, code).await;
    }
    // The twins: references to ordinary characters, `&` text that is no reference, a binary
    // file full of NULs, and system names and times with colons.
    let twins: Vec<(&str, Files)> = vec![
        (
            "refs-ok",
            md(
                "refs-ok",
                "AT&T &amp; &lt;tag&gt; &eacute; &#233 &copy; &NotAnEntity; &#65;\n",
            ),
        ),
        (
            "binary-nul",
            with(
                "binary-nul",
                "assets/logo.png",
                vec![0x89, b'P', b'N', b'G', 0, 0, 0, 13, 0, 0xff, 0, 1],
            ),
        ),
        (
            "colons-ok",
            install(
                "colons-ok",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm::sales","kind":"service","window":"12:30:45","ref":"std::vector","tag":"a:b"}]}"#,
            ),
        ),
    ];
    for (name, files) in twins {
        let archive = agent_tgz(name, &files);
        site.depot(name, &archive, &|_| {});
        let got = site.agent(name, &[]).await;
        assert_eq!(
            got.status,
            200,
            "{name}: {}",
            String::from_utf8_lossy(&got.body)
        );
        assert_eq!(site.cached(&archive).await.status, 200, "{name}");
    }
}
