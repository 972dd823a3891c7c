#!/usr/bin/env bash
# Fetches axe-core, the accessibility engine the browser test runs in
# Chromium, from the npm registry into target/axe (once; a pinned version,
# its tarball's SHA-256 checked). Needs curl (or npm).
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.11.0
sha256=39bed7d72308f6d620789c169d699bfd7e8da80f65b545821a6b2215c3e83107
dir=target/axe/node_modules/axe-core
if grep -qs "\"version\": \"$version\"" "$dir/package.json" && [ -f "$dir/axe.min.js" ]; then
  exit 0
fi
mkdir -p "$dir"
tarball=$(mktemp)
trap 'rm -f "$tarball"' EXIT
url="https://registry.npmjs.org/axe-core/-/axe-core-$version.tgz"
if command -v curl >/dev/null; then
  curl -fsSL --retry 3 "$url" -o "$tarball"
else
  npm pack --silent "axe-core@$version" --pack-destination "$(dirname "$tarball")" >/dev/null
  mv "$(dirname "$tarball")/axe-core-$version.tgz" "$tarball"
fi
echo "$sha256  $tarball" | sha256sum --check --quiet
tar xzf "$tarball" -C "$dir" --strip-components=1
echo "axe-core $version in $dir"
