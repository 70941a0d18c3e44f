#!/bin/sh
# Freezes the lifeline build under test, so a run is not affected by concurrent rebuilds or
# npm installs in the source tree: copies <src>/package.json, dist/ and node_modules/ into
# <dest> and writes <dest>/SNAPSHOT.json (git HEAD, dirty files, sha256 of dist).
# Usage: ./snapshot-lifeline.sh [src=<this repo>] [dest=<this folder>/lifeline-snapshot]
# Then:  LIFELINE_DIST=<dest>/dist node run.mjs --variant ...
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${1:-$(cd "$HERE/../.." && pwd)}
DEST=${2:-$HERE/lifeline-snapshot}
[ -f "$SRC/dist/index.js" ] || { echo "no $SRC/dist/index.js: build it first (cd $SRC && npm run build)" >&2; exit 1; }
disthash() { (cd "$1" && find dist -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1); }
for attempt in 1 2 3; do
  before=$(disthash "$SRC")
  rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
  cp -a "$SRC/package.json" "$SRC/dist" "$SRC/node_modules" "$DEST.tmp/"
  after=$(disthash "$SRC")
  copied=$(disthash "$DEST.tmp")
  [ "$before" = "$after" ] && [ "$after" = "$copied" ] && break
  echo "dist changed while copying (attempt $attempt); retrying" >&2
  [ $attempt = 3 ] && { echo "dist keeps changing; giving up" >&2; exit 1; }
  sleep 5
done
head=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$SRC" status --porcelain 2>/dev/null | wc -l)
newest=$(find "$SRC/dist" -type f -printf '%TY-%Tm-%TdT%TH:%TM:%TS\n' | sort | tail -1 | cut -c1-19)
cat > "$DEST.tmp/SNAPSHOT.json" <<JSON
{ "source": "$SRC", "gitHead": "$head", "dirtyFiles": $dirty, "distSha256": "$copied",
  "distNewestFile": "$newest", "takenAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "undici": "$(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$SRC/node_modules/undici/package.json" | head -1)" }
JSON
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
cat "$DEST/SNAPSHOT.json"
