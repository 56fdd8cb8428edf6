#!/usr/bin/env bash
# The e2e suite: miggate's install on the real one-node cluster of e2e/cluster.sh.
#
#   e2e/cluster.sh up && e2e/run.sh            every test, in order
#   e2e/run.sh install admission               the tests whose file names contain a word
#
# Each tests/NN-*.sh file defines test_* functions, run in the order they are defined; a test
# passes when its function exits 0. The files run in order and build on each other (the install
# first, the uninstall last), so naming a later one alone runs it on what is there. Without a
# cluster the suite is skipped, naming the command to run; under CI=true that is a failure.
set -uo pipefail
# shellcheck source=e2e/env.sh
. "$(dirname "$0")/env.sh"
# shellcheck source=e2e/lib.sh
. "$E2E_REPO/e2e/lib.sh"
cd "$E2E_REPO"

if ! bash e2e/cluster.sh status >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "e2e: no e2e cluster is up (e2e/cluster.sh status fails)" >&2
        exit 1
    fi
    echo "e2e: skipped: no e2e cluster is up; run: sudo e2e/cluster.sh up"
    exit 0
fi
if [ ! -x target/release/miggate ]; then
    # `miggate claim` and `miggate doctor` run on this machine, beside the image's binary.
    echo "e2e: target/release/miggate is missing; run: cargo build --release -p miggate (image/build.sh does)" >&2
    exit 1
fi
mkdir -p "$E2E_WORK"

passed=0
failed=0
failures=()
started=$SECONDS
for file in e2e/tests/[0-9]*.sh; do
    if (($# > 0)); then
        wanted=false
        for word in "$@"; do [[ "$file" == *"$word"* ]] && wanted=true; done
        $wanted || continue
    fi
    before=$(declare -F | awk '{print $3}' | grep '^test_' || true)
    # shellcheck source=/dev/null
    . "$file"
    tests=$(grep -o '^test_[a-z0-9_]*' "$file")
    for t in $tests; do
        grep -qx "$t" <<< "$before" && { echo "e2e: $t is defined twice" >&2; exit 2; }
        t0=$SECONDS
        if (set -eo pipefail; "$t"); then
            passed=$((passed + 1))
            printf 'ok    %-60s %4ds\n' "$(basename "$file" .sh) ${t#test_}" $((SECONDS - t0))
        else
            failed=$((failed + 1))
            failures+=("$(basename "$file" .sh) ${t#test_}")
            printf 'FAIL  %-60s %4ds\n' "$(basename "$file" .sh) ${t#test_}" $((SECONDS - t0))
        fi
    done
done

echo
echo "e2e took $((SECONDS - started)) s"
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "e2e: $passed passed, $failed failed"
((failed == 0))
