#!/bin/sh
# bin/apply-config-from-env.py of the Pulsar image, in the image of our bookie: the same rewrite
# of a configuration file from the environment (variables named like its keys, and
# PULSAR_PREFIX_<key> for keys it lacks), byte for byte what Pulsar's Python script writes
# (`bookie apply-config-from-env`, bookie/src/config/pulsar_env.rs). A shell script under the
# script's name, because the Helm chart runs it by that name; no Python in the image.
exec "${BOOKIE_BIN:-$(command -v bookie || echo /usr/local/bin/bookie)}" apply-config-from-env "$@"
