bin/apply-config-from-env.py conf/bookkeeper.conf;
export BOOKIE_MEM="-Xmx128M";
until timeout 15 bin/bookkeeper shell whatisinstanceid; do
  sleep 3;
done;
