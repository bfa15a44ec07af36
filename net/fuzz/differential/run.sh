#!/bin/sh
# Differential check of net's v3 parser against the Java bookie's parsers:
# protobuf-java (bookkeeper-proto 4.17.3) and LightProto (bookkeeper-proto 4.18.2).
#
# Usage: net/fuzz/differential/run.sh [SEED] [COUNT]
# Needs java, javac, mvn (Maven Central reachable once), python3, cargo.
# Prints, per message kind, how many mutated bodies each parser accepted (OK) or
# rejected (ERR), with examples; then the request bodies whose decoded value differs
# from protobuf-java's. Exits 1 if net disagrees with protobuf-java anywhere.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SEED=${1:-1}
COUNT=${2:-30000}
WORK=$(mktemp -d)
M2=${M2:-$HOME/.m2/repository}

for version in 4.17.3 4.18.2; do
    mvn -q dependency:get -Dartifact=org.apache.bookkeeper:bookkeeper-proto:$version
done
jar() { find "$M2/$1" -name "$2" | sort | tail -1; }
PJCP=$(jar org/apache/bookkeeper/bookkeeper-proto/4.17.3 'bookkeeper-proto-*.jar'):$(jar com/google/protobuf/protobuf-java/3.25.5 'protobuf-java-*.jar')
NETTY=$(ls "$M2/io/netty/netty-buffer" | grep '^4\.2' | sort -V | tail -1)
LPCP=$(jar org/apache/bookkeeper/bookkeeper-proto/4.18.2 'bookkeeper-proto-*.jar'):$M2/io/netty/netty-buffer/$NETTY/netty-buffer-$NETTY.jar:$M2/io/netty/netty-common/$NETTY/netty-common-$NETTY.jar
mkdir -p "$WORK/pj" "$WORK/lp"
javac -cp "$PJCP" -d "$WORK/pj" "$HERE/ProbePj.java" "$HERE/CanonPj.java"
javac -cp "$LPCP" -d "$WORK/lp" "$HERE/ProbeLp.java"
(cd "$ROOT" && cargo build -q -p net --example decode_hex)
RUST="${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/decode_hex"

verdicts() { cut -c1-3 | sed 's/ //'; }
status=0
for kind in req resp; do
    cases="$WORK/$kind.txt"
    python3 "$HERE/mutate.py" "$kind" "$SEED" "$COUNT" > "$cases"
    "$RUST" < "$cases" | verdicts > "$cases.rs"
    java -cp "$WORK/pj:$PJCP" ProbePj < "$cases" | verdicts > "$cases.pj"
    java -cp "$WORK/lp:$LPCP" ProbeLp < "$cases" | verdicts > "$cases.lp"
    echo "== $kind: $(wc -l < "$cases") bodies; columns: net protobuf-java LightProto"
    paste -d' ' "$cases.rs" "$cases.pj" "$cases.lp" "$cases" | awk '
        { key = $1 " " $2 " " $3; count[key]++; if (count[key] <= 3) example[key] = example[key] "\n      " $5 }
        END { for (key in count) print "  " key ": " count[key] example[key] }'
    if ! paste -d' ' "$cases.rs" "$cases.pj" | awk '$1 != $2 { exit 1 }'; then
        echo "  net and protobuf-java disagree on accept/reject"; status=1
    fi
done

cases="$WORK/req.txt"
"$RUST" --canon < "$cases" > "$cases.canon.rs"
java -cp "$WORK/pj:$PJCP" CanonPj < "$cases" > "$cases.canon.pj"
mismatches=$(paste -d'|' "$cases.canon.rs" "$cases.canon.pj" "$cases" \
    | awk -F'|' '$1 ~ /^OK/ && $1 != $2 { n++; if (n <= 5) print "  net " $1 "\n  pj  " $2 "\n  in  " $3 > "/dev/stderr" } END { print n + 0 }')
echo "== req values: $mismatches accepted bodies decode to another value than protobuf-java's"
[ "$mismatches" -eq 0 ] || status=1
rm -rf "$WORK"
exit $status
