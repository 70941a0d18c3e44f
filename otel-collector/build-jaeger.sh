#!/usr/bin/env bash
# Builds Jaeger v2 (which is also an OpenTelemetry Collector) from the Go module proxy, once per
# version, into .cache/bin/jaeger-<version>. Jaeger's Go module has no /v2 suffix, so the v2.13.0
# release is resolved as v1.76.0; `go install pkg@version` refuses it (its go.mod has replace
# directives), `go get -tool` in a module of its own does not.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${JAEGER_MODULE_VERSION:-v1.76.0}"
BIN="$ROOT/.cache/bin/jaeger-$VERSION"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "go is required to build Jaeger (see otel-collector/README.md)" >&2; exit 1; }
TOOL="$ROOT/.cache/jaeger-tool-$VERSION"
mkdir -p "$TOOL" "$ROOT/.cache/bin"
cd "$TOOL"
[[ -f go.mod ]] || go mod init local/jaegertool >/dev/null 2>&1
echo "building Jaeger $VERSION (first time only: several minutes)" >&2
go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$VERSION" >&2
CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger >&2
mv "$BIN.tmp" "$BIN"
echo "$BIN"
