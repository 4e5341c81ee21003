#!/usr/bin/env bash
# Regenerates the OpenPGP fixtures the apt unit tests read (signed.rs, keyring.rs), with gpg in
# a throwaway GNUPGHOME. Run from this directory; commit what it writes.
set -euo pipefail
cd "$(dirname "$0")"
export GNUPGHOME; GNUPGHOME="$(mktemp -d)"; trap 'rm -rf "$GNUPGHOME"' EXIT
g() { gpg --batch --yes --quiet --pinentry-mode loopback --passphrase '' "$@"; }
fpr() { gpg --batch --with-colons --list-keys "$1" | awk -F: '/^fpr/ {print $10; exit}'; }
g --quick-gen-key 'rsa test <rsa@test>' rsa3072 sign never
g --quick-gen-key 'ed test <ed@test>' ed25519 sign never
g --quick-gen-key 'foreign <foreign@test>' ed25519 sign never
# Expired: made in 2020 with a one-day lifetime.
g --faked-system-time 20200101T000000 --quick-gen-key 'expired <expired@test>' ed25519 sign 1d
g --quick-gen-key 'revoked <revoked@test>' ed25519 sign never
# Certifies only; signs with a subkey (as many third-party repositories do).
g --quick-gen-key 'sub test <sub@test>' ed25519 cert never
g --quick-add-key "$(fpr sub@test)" ed25519 sign never
printf 'Origin: Test\nSuite: stable\nDate: Tue, 01 Dec 2026 10:00:00 UTC\n- dash line\n' > body.txt
g -u "$(fpr rsa@test)" --clearsign -o rsa.InRelease body.txt
g -u "$(fpr ed@test)" --clearsign -o ed.InRelease body.txt
g -u "$(fpr foreign@test)" --clearsign -o foreign.InRelease body.txt
g -u "$(fpr foreign@test)" -u "$(fpr ed@test)" --clearsign -o two.InRelease body.txt
g --faked-system-time 20200101T120000 -u "$(fpr expired@test)" --clearsign -o expired.InRelease body.txt
g -u "$(fpr revoked@test)" --clearsign -o revoked.InRelease body.txt
g -u "$(fpr sub@test)" --clearsign -o sub.InRelease body.txt
g -u "$(fpr ed@test)" --digest-algo SHA1 --clearsign -o sha1.InRelease body.txt
g -u "$(fpr rsa@test)" --detach-sign -o rsa.Release.gpg body.txt
g -u "$(fpr ed@test)" --armor --detach-sign -o ed.Release.gpg.asc body.txt
# gpg writes a revocation certificate for every new key; importing it revokes the key.
sed 's/^:-----BEGIN/-----BEGIN/' "$GNUPGHOME/openpgp-revocs.d/$(fpr revoked@test).rev" > rev.asc
g --import rev.asc; rm -f rev.asc
gpg --batch --export "$(fpr rsa@test)" "$(fpr ed@test)" "$(fpr expired@test)" "$(fpr revoked@test)" "$(fpr sub@test)" > keyring.gpg
gpg --batch --armor --export "$(fpr rsa@test)" "$(fpr ed@test)" > keyring.asc
# A real repository, as dpkg-deb and apt-ftparchive make it, signed by the Ed25519 key.
rm -rf repo; mkdir -p repo/pkg/DEBIAN repo/pkg/usr/share/fghello
printf 'Package: fghello\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@test>\nDescription: test\n a test package\n' > repo/pkg/DEBIAN/control
echo hello > repo/pkg/usr/share/fghello/hello
mkdir -p repo/pool/main/f/fghello repo/dists/stable/main/binary-all
dpkg-deb --root-owner-group -Zgzip --build repo/pkg repo/pool/main/f/fghello/fghello_1.0_all.deb >/dev/null
rm -rf repo/pkg
(cd repo && apt-ftparchive packages pool > dists/stable/main/binary-all/Packages)
gzip -9n repo/dists/stable/main/binary-all/Packages
(cd repo/dists/stable && apt-ftparchive -o APT::FTPArchive::Release::Suite=stable release . > ../Release.tmp && mv ../Release.tmp Release)
g -u "$(fpr ed@test)" --clearsign -o repo/dists/stable/InRelease repo/dists/stable/Release
rm repo/dists/stable/Release
gpg --batch --list-keys
