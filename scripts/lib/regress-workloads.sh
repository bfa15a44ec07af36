# Sourced by scripts/bench-regress and scripts/gate-sensitivity: the gate's workloads, one
# bkperf command line each, so the sensitivity table is measured on what the gate runs.
# Needs SIZE, RATE, MIXED_RATE and PRELOAD set.

# regress_workload_args WORKLOAD: the bkperf arguments of one workload.
regress_workload_args() {
  case "$1" in
    closed) echo "write --protocol v3 --entry-size $SIZE --outstanding 1000 --bookie-arg=--no-pin --bookie-arg=--shards --bookie-arg=1 --workload-id regress-closed-${SIZE}B" ;;
    write) echo "write --rate $RATE --entry-size $SIZE --workload-id regress-${SIZE}B-rate$RATE" ;;
    catchup) echo "read --cold --protocol v2 --pattern sequential --read-outstanding 100 --ledgers 1 --preload $PRELOAD --preload-size $SIZE --workload-id regress-catchup-${SIZE}B" ;;
    mixed-catchup) echo "mixed --cold --protocol v3 --entry-size $SIZE --rate $MIXED_RATE --pattern sequential --read-outstanding 100 --ledgers 1 --preload $PRELOAD --preload-size $SIZE --workload-id regress-mixed-catchup-${SIZE}B-rate$MIXED_RATE" ;;
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
