#!/usr/bin/env bash
# Builds FerretDB (a MongoDB wire-protocol server; its SQLite backend needs no other service) from
# the Go module proxy, once per version, into .cache/bin/ferretdb-<version>. MongoDB itself is not
# packaged by Debian; the mongodb driver tests (test/drivers/mongodb.test.ts) run against this.
# FerretDB embeds build/version/version.txt, which its release process writes and the module lacks
# (the binary panics at start without it), so the module is copied out of the module cache, the
# file written, and the copy built with its own go.mod. SQLite is modernc.org/sqlite: no cgo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${FERRETDB_VERSION:-v1.24.2}"
BIN="$ROOT/.cache/bin/ferretdb-$VERSION"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "go is required to build FerretDB (see otel-collector/README.md)" >&2; exit 1; }
echo "building FerretDB $VERSION (first time only: about 3 minutes)" >&2
DIR="$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/FerretDB/FerretDB@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$DIR" && -d "$DIR" ]] || { echo "go mod download gave no directory for FerretDB $VERSION" >&2; exit 1; }
SRC="$ROOT/.cache/ferretdb-src-$VERSION"
rm -rf "$SRC"
mkdir -p "$ROOT/.cache/bin"
cp -R "$DIR" "$SRC"
chmod -R u+w "$SRC"
echo "$VERSION" >"$SRC/build/version/version.txt"
cd "$SRC"
CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -o "$BIN.tmp" ./cmd/ferretdb >&2
mv "$BIN.tmp" "$BIN"
rm -rf "$SRC"
echo "$BIN"
