bin/apply-config-from-env.py conf/bookkeeper.conf;

OPTS="${OPTS} -Dlog4j2.formatMsgNoLookups=true" exec bin/bookkeeper autorecovery
