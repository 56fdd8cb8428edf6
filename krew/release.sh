#!/usr/bin/env bash
# The kubectl plugin's release: an archive of the binary named kubectl-miggate (and LICENSE) for
# each platform built, and krew's manifest of them, krew/miggate.yaml, kept in the repository
# (`kubectl krew install --manifest=krew/miggate.yaml`, or a PR to krew-index).
#
#   krew/release.sh [--check]
#
# Builds target/release/miggate (linux/amd64, this machine's), packs
# target/krew/kubectl-miggate_v<version>_linux_amd64.tar.gz with fixed names, owners and times
# (so the same binary packs to the same bytes), and writes the manifest naming each archive at
# the release's download address with its sha256. Upload the archives to the GitHub release
# v<version>, then commit the manifest. --check only holds the kept manifest to the crate's
# version and shape, builds nothing, and fails when it is stale.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
repo=https://github.com/miggate/miggate
manifest=krew/miggate.yaml

if [[ "${1:-}" == "--check" ]]; then
    grep -qx "  version: $version" "$manifest" ||
        { echo "krew/release.sh: $manifest is not for $version (run krew/release.sh)" >&2; exit 1; }
    grep -q "releases/download/$version/kubectl-miggate_${version}_linux_amd64.tar.gz" "$manifest" ||
        { echo "krew/release.sh: $manifest does not name the $version archive" >&2; exit 1; }
    grep -Eq '^    sha256: [0-9a-f]{64}$' "$manifest" ||
        { echo "krew/release.sh: $manifest has no sha256" >&2; exit 1; }
    echo "$manifest: $version"
    exit 0
fi

cargo build --release --locked -p miggate
out=target/krew
rm -rf "$out"
mkdir -p "$out/pack"
strip --strip-debug -o "$out/pack/kubectl-miggate" target/release/miggate
cp LICENSE "$out/pack/LICENSE"
archive=$out/kubectl-miggate_${version}_linux_amd64.tar.gz
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$out/pack" -cf - kubectl-miggate LICENSE |
    gzip -n -9 > "$archive"
sha=$(sha256sum "$archive" | cut -d' ' -f1)

cat > "$manifest" <<YAML
# krew's manifest of the kubectl plugin, written by krew/release.sh for the archives it packs
# (upload them to the GitHub release $version before publishing this).
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: miggate
spec:
  version: $version
  homepage: $repo
  shortDescription: Check GPU checkpoints restore where they fit; doctor the install
  description: |
    miggate decides whether a GPU checkpoint (CRIU + cuda-checkpoint) can be restored on a
    target: a whole GPU and a MIG slice of one are told apart, and every check names both
    sides. As a kubectl plugin: \`kubectl miggate doctor\` walks the install (webhook,
    certificates, caches, GPU nodes' inventories, policies) and says how to fix what fails;
    \`kubectl miggate where\` lists the nodes a checkpoint fits; \`kubectl miggate claim\`
    prints a DRA claim for its GPU shape.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $repo/releases/download/$version/kubectl-miggate_${version}_linux_amd64.tar.gz
    sha256: $sha
    bin: kubectl-miggate
    files:
    - from: kubectl-miggate
      to: .
    - from: LICENSE
      to: .
YAML
echo "$archive $sha"
echo "wrote $manifest"
