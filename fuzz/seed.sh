#!/usr/bin/env bash
# Copies the recorded test data into fuzz/corpus/<target>/ as seed inputs (fuzz/corpus is
# git-ignored; run this before `cargo fuzz run`). Safe to run again: it only adds files.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data="$here/../testdata"
seed() { # seed <target> <file>...
    local target="$1"
    shift
    mkdir -p "$here/corpus/$target"
    local f
    for f in "$@"; do
        [ -f "$f" ] || continue
        # Name by path so two seeds with the same base name do not overwrite each other.
        local name="${f#"$data"/}"
        cp -- "$f" "$here/corpus/$target/seed-${name//\//_}"
    done
}
shopt -s nullglob globstar
seed nvidia_smi_list "$data"/nvidia-smi/list/*.txt "$data"/nvidia-smi/replay/*/list.txt "$data"/nvidia-smi/errors/*.txt
seed nvidia_smi_query "$data"/nvidia-smi/query-gpu/*.txt "$data"/nvidia-smi/replay/*/query.csv \
    "$data"/nvidia-smi/replay/*/version.txt "$data"/nvidia-smi/errors/*.txt
seed nvidia_smi_mig_tables "$data"/nvidia-smi/mig-*/*.txt "$data"/nvidia-smi/replay/*/lci.txt \
    "$data"/nvidia-smi/errors/*.txt
seed manifest "$data"/manifests/**/*.json "$data"/manifests/**/*.yaml "$data"/manifests/**/*.yml
for t in nvidia_smi_list nvidia_smi_query nvidia_smi_mig_tables manifest; do
    echo "$t: $(find "$here/corpus/$t" -type f | wc -l) files"
done
