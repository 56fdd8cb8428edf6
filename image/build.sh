#!/usr/bin/env bash
# Builds miggate's OCI image on this machine, with no registry and no network: a release
# build of the binary, a root file system of the binary and the libraries `ldd` names, then
# `buildah build` from scratch (image/Containerfile). No daemon, no RUN step, so no container
# runtime is needed either.
#
#   image/build.sh [--check] [TAG]
#
# TAG defaults to localhost/miggate:<version>, the reference the chart's defaults (and deploy/) name. The image
# is left in buildah's local storage and written as an OCI archive, target/image/miggate.oci.tar
# (`buildah push TAG docker://REGISTRY/miggate:<version>` or `skopeo copy oci-archive:...`
# pushes it). --check then unpacks the image with umoci and runs `miggate --version` from its
# root file system as the image's user, and fails unless that prints the crate's version.
#
# Needs Debian's buildah (and umoci for --check); installs neither itself.
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
if [[ "${1:-}" == "--check" ]]; then
    check=true
    shift
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
tag=${1:-localhost/miggate:${version}}
out=target/image
storage=(--storage-driver vfs)

for tool in buildah ldd strip; do
    command -v "$tool" >/dev/null || { echo "image/build.sh: $tool is not installed (apt-get install buildah)" >&2; exit 2; }
done

echo "== cargo build --release -p miggate"
cargo build --release --locked -p miggate
binary=target/release/miggate

echo "== root file system"
rm -rf "$out"
rootfs=$out/context/rootfs
mkdir -p "$rootfs/usr/bin" "$rootfs/etc"
# Without its debug information (line tables, 80% of the release binary); symbols stay, so a
# panic's backtrace still names functions.
strip --strip-debug -o "$rootfs/usr/bin/miggate" "$binary"
chmod 0755 "$rootfs/usr/bin/miggate"
# The kubectl plugin's name for the same binary: `kubectl miggate …` where the image's /usr/bin
# is on PATH (a debug container, a CI job's image); its help then reads `kubectl miggate`.
ln -s miggate "$rootfs/usr/bin/kubectl-miggate"
# The binary's shared libraries and the dynamic loader, at the paths the binary asks for.
ldd "$binary" | awk '/=>/ { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }' | sort -u |
    while read -r lib; do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin' > "$rootfs/etc/passwd"
echo 'nonroot:x:65532:' > "$rootfs/etc/group"
du -sh "$rootfs"

echo "== buildah build $tag"
buildah "${storage[@]}" build --quiet --isolation chroot --layers=false \
    -f image/Containerfile -t "$tag" "$out/context"
# An OCI layout's reference is a bare tag (no registry, no slash): the version.
buildah "${storage[@]}" push --quiet "$tag" "oci-archive:$out/miggate.oci.tar:$version"
ls -l "$out/miggate.oci.tar"

if $check; then
    echo "== miggate --version from the image"
    command -v umoci >/dev/null || { echo "image/build.sh: umoci is not installed (apt-get install umoci)" >&2; exit 2; }
    mkdir -p "$out/oci"
    tar -xf "$out/miggate.oci.tar" -C "$out/oci"
    umoci unpack --rootless --image "$out/oci:$version" "$out/bundle" >/dev/null
    user=$(tr -d ' \t\n' < "$out/bundle/config.json" | grep -Eo '"user":\{"uid":[0-9]+,"gid":[0-9]+' || true)
    [[ "$user" == '"user":{"uid":65532,"gid":65532' ]] ||
        { echo "image/build.sh: the image does not run as 65532:65532 ($user)" >&2; exit 1; }
    files=$(cd "$out/bundle/rootfs" && find . -type f | sort)
    echo "$files"
    printed=$(chroot --userspec=65532:65532 "$out/bundle/rootfs" /usr/bin/miggate --version)
    echo "$printed"
    [[ "$printed" == "miggate $version" ]] || { echo "image/build.sh: expected 'miggate $version'" >&2; exit 1; }
    usage=$(chroot --userspec=65532:65532 "$out/bundle/rootfs" /usr/bin/kubectl-miggate --help | grep '^Usage:')
    echo "$usage"
    [[ "$usage" == "Usage: kubectl miggate "* ]] || { echo "image/build.sh: kubectl-miggate's help does not read 'kubectl miggate'" >&2; exit 1; }
fi
