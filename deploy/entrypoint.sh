#!/bin/sh
# Entry point of deploy/Dockerfile: the defaults the official BookKeeper image's entry point
# derives from its helper variables, then the bookie, which reads every BK_<key> variable
# itself (over a conf file if one is given with --conf; flags win over both).
#   BK_DATA_DIR (/data/bookkeeper)  journal and ledger directories under it (our index lives
#                                   in the ledger directories: no indexDirectories)
#   BK_CLUSTER_ROOT_PATH ("")       ZooKeeper paths under it: <root>/ledgers
#   PORT0 or BOOKIE_PORT (3181)     bookiePort
set -eu
BK_DATA_DIR=${BK_DATA_DIR:-/data/bookkeeper}
PORT0=${PORT0:-${BOOKIE_PORT:-3181}}
export BK_bookiePort="${BK_bookiePort:-$PORT0}"
export BK_zkLedgersRootPath="${BK_zkLedgersRootPath:-${BK_CLUSTER_ROOT_PATH:-}/ledgers}"
export BK_journalDirectories="${BK_journalDirectories:-${BK_journalDirectory:-$BK_DATA_DIR/journal}}"
export BK_ledgerDirectories="${BK_ledgerDirectories:-$BK_DATA_DIR/ledgers}"
if [ -n "${BK_zkServers:-}" ] && [ -z "${BK_metadataServiceUri:-}" ]; then
  export BK_metadataServiceUri="zk://${BK_zkServers}${BK_zkLedgersRootPath}"
fi
mkdir -p "$BK_journalDirectories" "$BK_ledgerDirectories"
exec "${BOOKIE_BIN:-/usr/local/bin/bookie}" "$@"
