# Sourced by scripts/bench-regress and scripts/gate-sensitivity: the gate's workloads, one
# bkperf command line each, so the sensitivity table is measured on what the gate runs.
# Needs SIZE, RATE, MIXED_RATE and PRELOAD set.

# The first ledger id of every workload. bkperf's default derives it from the clock, and the
# bookie hashes a ledger to a shard: with two shards, a clock-chosen id put the catch-up's one
# ledger on the read connection's shard in some rounds and on the other in others, and a read
# that crosses shards costs the bookie ~1.4 us more CPU (3.2-3.5 against 1.8-2.45 us per read,
# 2026-12-05): a coin flip per round that failed the gate on an unchanged bookie (catch-up CPU
# per read 1.607, stop 42). One id puts every round of both sides on the same shards. With
# today's bkperf the catch-up's reads all cross shards (its read connection is the second one
# accepted, dealt to shard 1; 65536 hashes to shard 0): the common case of a bookie with many
# ledgers. Each round runs a fresh bookie, so the id never meets an earlier ledger.
REGRESS_FIRST_LEDGER=${REGRESS_FIRST_LEDGER:-65536}

# regress_workload_args WORKLOAD: the bkperf arguments of one workload.
regress_workload_args() {
  local id="--first-ledger-id $REGRESS_FIRST_LEDGER"
  case "$1" in
    closed) echo "write --protocol v3 --entry-size $SIZE --outstanding 1000 --bookie-arg=--no-pin --bookie-arg=--shards --bookie-arg=1 --workload-id regress-closed-${SIZE}B $id" ;;
    write) echo "write --rate $RATE --entry-size $SIZE --workload-id regress-${SIZE}B-rate$RATE $id" ;;
    catchup) echo "read --cold --protocol v2 --pattern sequential --read-outstanding 100 --ledgers 1 --preload $PRELOAD --preload-size $SIZE --workload-id regress-catchup-${SIZE}B $id" ;;
    mixed-catchup) echo "mixed --cold --protocol v3 --entry-size $SIZE --rate $MIXED_RATE --pattern sequential --read-outstanding 100 --ledgers 1 --preload $PRELOAD --preload-size $SIZE --workload-id regress-mixed-catchup-${SIZE}B-rate$MIXED_RATE $id" ;;
    *) echo "unknown workload $1 (closed, write, catchup, mixed-catchup)" >&2; return 2 ;;
  esac
}

# regress_pinned WORKLOAD: 0 when the workload runs pinned (the bookie on CPU 1 with one shard,
# bkperf on CPU 0, as scripts/bench-vs-java's W3: a closed loop then measures the bookie's own
# core, not the two processes fighting over both).
regress_pinned() {
  [ "$1" = closed ] && command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]
}

# regress_bookie_wrapper BIN WRAPPER [ENV=VALUE...]: writes an executable WRAPPER that starts BIN
# on CPU 1 (same pid: exec all the way, so bkperf's /proc figures are the bookie's), with the
# given environment.
regress_bookie_wrapper() {
  local bin=$1 wrapper=$2; shift 2
  { echo '#!/bin/sh'
    for kv in "$@"; do echo "export $kv"; done
    echo "exec taskset -c 1 \"$bin\" \"\$@\""
  } >"$wrapper"
  chmod +x "$wrapper"
}
