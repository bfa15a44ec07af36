#!/bin/sh
# Deprecated in Pulsar's image too: apply-config-from-env.py --prefix PREFIX FILE...
prefix=$1
shift
exec "$(dirname "$0")/apply-config-from-env.py" --prefix "$prefix" "$@"
