#!/usr/bin/env bash
# Stands in for node-gyp when prebuildify runs (`npm run prebuild`, scripts/pack.mjs):
#   prebuildify --napi --tag-libc --node-gyp scripts/napi-gyp-shim.sh
# prebuildify calls it as `node-gyp rebuild --target=<node> --devdir=<dir> --arch=x64 --release`
# and then collects build/Release/*.node into prebuilds/<platform>-<arch>/. memwal is built by
# napi-rs, not node-gyp, so this runs the napi release build (the same cargo invocation as
# `npm run build`, so a warm target/ makes it a no-op) into the scratch dir build/napi/ and
# copies the addon to build/Release/memwal.node. It never writes the root
# memwal.linux-x64-gnu.node or binding.js, which running tests may have loaded.
set -euo pipefail
cd "$(dirname "$0")/.."

for arg in "$@"; do
  case "$arg" in
    rebuild | --release | --target=* | --devdir=* | --arch=x64) ;;
    *)
      echo "napi-gyp-shim: unsupported node-gyp argument '$arg' (only release builds for x64)" >&2
      exit 2
      ;;
  esac
done

rm -rf build/napi build/Release
node node_modules/@napi-rs/cli/dist/cli.js build --platform --release \
  --manifest-path crates/memwal-node/Cargo.toml -o build/napi --no-js --dts binding.d.ts \
  --no-const-enum -- --locked
mkdir -p build/Release
cp build/napi/memwal.linux-x64-gnu.node build/Release/memwal.node
