#!/usr/bin/env bash
# Builds lifeline's agent/gateway collector (builder/manifest.yaml) with the OpenTelemetry Collector
# Builder from the Go module proxy, once per version, into .cache/bin/lifeline-otelcol-<version>.
# Prints the binary's path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="v0.161.0"
# Named by the manifest's content too: adding a component must not reuse a cached binary without it.
MANIFEST_HASH="$(sha256sum "$ROOT/otel-collector/builder/manifest.yaml" | cut -c1-8)"
BIN="$ROOT/.cache/bin/lifeline-otelcol-$VERSION-$MANIFEST_HASH"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "go is required to build the collector (see otel-collector/README.md)" >&2; exit 1; }
WORK="$ROOT/.cache/otelcol-build-$VERSION"
mkdir -p "$WORK" "$ROOT/.cache/bin"
echo "building lifeline-otelcol $VERSION (first time only: several minutes)" >&2
GOBIN="$WORK/bin" go install "go.opentelemetry.io/collector/cmd/builder@$VERSION" >&2
sed "s#output_path: ./build#output_path: $WORK/build#" "$ROOT/otel-collector/builder/manifest.yaml" > "$WORK/manifest.yaml"
CGO_ENABLED=0 "$WORK/bin/builder" --config "$WORK/manifest.yaml" >&2
mv "$WORK/build/lifeline-otelcol" "$BIN"
echo "$BIN"
