#!/usr/bin/env bash
# The webhook's throughput beside two echo servers, over loopback TLS, driven by wrk
# (bench/webhook/README.md says what each server is and what the figures mean).
#
#   bash bench/webhook/run.sh [SECONDS] [CONNECTIONS] [ROUNDS]      # defaults: 8 32 3
#
# Builds `miggate` and the `echo` example (release), makes a self-signed certificate for
# 127.0.0.1 in a temporary directory, then for each of ROUNDS rounds runs the three servers in
# turn (the order reversed every other round): each is started, warmed for 2 s with
# `wrk -t2 -cCONNECTIONS`, measured for SECONDS with `--latency`, and stopped. Prints each
# run's requests/s, p50 and p99, then the medians and the ratio miggate / echo-bare (the median
# of the rounds' ratios). Needs wrk (Debian: apt-get install -y wrk), openssl and curl.
# MIGGATE_BENCH_PORT and MIGGATE_BENCH_HEALTH_PORT (18443, 18080) move the loopback ports.
# MIGGATE_BENCH_BASELINE names the `miggate` binary of another build (a base commit's
# target/release/miggate): it runs as a fourth server, `baseline`, with the same flags in every
# round, and the ratios baseline / echo-bare and miggate / baseline are printed too, so a change
# is measured against its base alternating in one run.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage="usage: bench/webhook/run.sh [SECONDS] [CONNECTIONS] [ROUNDS]"
seconds="${1:-8}"
connections="${2:-32}"
rounds="${3:-3}"
for n in "$seconds" "$connections" "$rounds"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$usage (positive integers)" >&2; exit 2; }
done
warm=2
threads=$((connections < 2 ? connections : 2))
port="${MIGGATE_BENCH_PORT:-18443}"
health_port="${MIGGATE_BENCH_HEALTH_PORT:-18080}"
body="testdata/admission/pod-create-restore-allowed.json"
script="bench/webhook/post.lua"
release="${CARGO_TARGET_DIR:-target}/release"
url="https://127.0.0.1:$port/validate"
baseline="${MIGGATE_BENCH_BASELINE:-}"
if [[ -n "$baseline" && ! -x "$baseline" ]]; then
    echo "MIGGATE_BENCH_BASELINE: $baseline is not an executable" >&2
    exit 2
fi

for tool in wrk openssl curl cargo; do
    command -v "$tool" >/dev/null || {
        echo "bench/webhook/run.sh needs $tool (wrk: apt-get install -y wrk)" >&2
        exit 2
    }
done

echo "== build (release)"
cargo build --release --locked -p miggate --bin miggate
cargo build --release --locked -p miggate-webhook --example echo

work="$(mktemp -d)"
server=""
stop() {
    if [[ -n "$server" ]]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
        server=""
    fi
}
cleanup() {
    stop
    rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null

# Starts server $1 in the background and waits until it allows the review.
start() {
    local name="$1"
    case "$name" in
    echo-bare)
        "$release/examples/echo" --cert "$work/tls.crt" --key "$work/tls.key" \
            --listen "127.0.0.1:$port" >"$work/$name.log" 2>&1 &
        ;;
    echo-parse)
        "$release/examples/echo" --parse --cert "$work/tls.crt" --key "$work/tls.key" \
            --listen "127.0.0.1:$port" >"$work/$name.log" 2>&1 &
        ;;
    miggate | baseline)
        local binary="$release/miggate"
        [[ "$name" == baseline ]] && binary="$baseline"
        "$binary" webhook --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
            --store dir:testdata/webhook-store --listen "127.0.0.1:$port" \
            --health-listen "127.0.0.1:$health_port" >"$work/$name.log" 2>&1 &
        ;;
    esac
    server=$!
    local i code
    for ((i = 0; i < 300; i++)); do
        if ! kill -0 "$server" 2>/dev/null; then
            echo "$name exited before it answered:" >&2
            cat "$work/$name.log" >&2
            server=""
            exit 1
        fi
        code="$(curl -s --cacert "$work/tls.crt" -o "$work/answer.json" -w '%{http_code}' \
            -H 'content-type: application/json' --data-binary "@$body" "$url" || true)"
        if [[ "$code" == 200 ]] && grep -Eq '"allowed": ?true' "$work/answer.json"; then
            return 0
        fi
        sleep 0.1
    done
    echo "$name did not allow the review within 30 s (last status $code)" >&2
    cat "$work/$name.log" >&2
    exit 1
}

# "1.23ms" (wrk's latency) in milliseconds.
ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        f = (u == "us") ? 0.001 : (u == "ms") ? 1 : (u == "s") ? 1000 : (u == "m") ? 60000 : -1
        if (f < 0) exit 1
        printf "%.2f", n * f
    }'
}

# The median of the numbers on stdin, one a line.
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) exit 1
        if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2
    }'
}

MIGGATE_BENCH_BODY="$body"
export MIGGATE_BENCH_BODY
results="$work/results"
: >"$results"

echo "== $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r), $(wrk --version 2>&1 | head -n1 | cut -d' ' -f1-2)"
echo "== wrk -t$threads -c$connections -s $script, warm ${warm}s, measured ${seconds}s --latency; body $body ($(wc -c <"$body") bytes); $rounds rounds"
servers=(echo-bare echo-parse miggate)
[[ -n "$baseline" ]] && servers+=(baseline)
for ((round = 1; round <= rounds; round++)); do
    order=("${servers[@]}")
    if ((round % 2 == 0)); then
        order=()
        for ((i = ${#servers[@]} - 1; i >= 0; i--)); do order+=("${servers[i]}"); done
    fi
    for name in "${order[@]}"; do
        start "$name"
        wrk -t"$threads" -c"$connections" -d"${warm}s" -s "$script" "$url" >/dev/null
        wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency -s "$script" "$url" >"$work/wrk.txt"
        stop
        rate="$(awk '/^Requests\/sec:/ { print $2 }' "$work/wrk.txt")"
        p50="$(ms "$(awk '$1 == "50%" { print $2 }' "$work/wrk.txt")")"
        p99="$(ms "$(awk '$1 == "99%" { print $2 }' "$work/wrk.txt")")"
        if [[ -z "$rate" ]] || grep -q 'Non-2xx' "$work/wrk.txt"; then
            echo "$name: wrk reports failed requests:" >&2
            cat "$work/wrk.txt" >&2
            exit 1
        fi
        errors="$(grep 'Socket errors' "$work/wrk.txt" || true)"
        printf 'round %d  %-10s %9.0f req/s  p50 %6s ms  p99 %6s ms%s\n' \
            "$round" "$name" "$rate" "$p50" "$p99" "${errors:+  ($errors)}"
        echo "$round $name $rate $p50 $p99" >>"$results"
    done
done

echo "== medians of $rounds rounds"
for name in "${servers[@]}"; do
    printf '%-10s %9.0f req/s  p50 %6s ms  p99 %6s ms\n' "$name" \
        "$(awk -v s="$name" '$2 == s { print $3 }' "$results" | median)" \
        "$(awk -v s="$name" '$2 == s { print $4 }' "$results" | median)" \
        "$(awk -v s="$name" '$2 == s { print $5 }' "$results" | median)"
done
# Each round's ratio, then their median: rounds share a machine state, days do not.
ratios() {
    awk -v of="$1" -v over="$2" '{ r[$1, $2] = $3; n = ($1 > n) ? $1 : n } END {
        for (i = 1; i <= n; i++) printf "%.2f\n", r[i, of] / r[i, over]
    }' "$results"
}
pairs=("miggate echo-bare" "miggate echo-parse")
[[ -n "$baseline" ]] && pairs+=("baseline echo-bare" "baseline echo-parse" "miggate baseline")
for pair in "${pairs[@]}"; do
    read -r of over <<<"$pair"
    printf '%s / %-10s %s (median %s)\n' "$of" "$over" \
        "$(ratios "$of" "$over" | paste -sd' ')" "$(ratios "$of" "$over" | median)"
done
