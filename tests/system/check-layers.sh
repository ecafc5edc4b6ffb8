#!/bin/sh
# check-layers.sh: the layers keep to their own headers. The core (the
# mailbox, the reactor, service threads, buffers, io_uring, sockets,
# connections and transports) includes no header of TLS, delivery, the
# store, the cluster or a protocol; a protocol includes no header of the
# store or the cluster. Only the #include "..." lines of each module's own
# .c and .h count (not what those headers include in turn).
#
#   tests/system/check-layers.sh
#
# Run by `make check-layers` (not yet by `make check`). Silent when
# every file keeps to its layer; otherwise prints "FILE: includes HEADER
# (RULE)" for each include that breaks a rule and exits 1.
set -u
cd "$(dirname "$0")/../.." || exit 1

# rule FILE_PATTERNS HEADER_PATTERNS NAME: every file matching one of
# FILE_PATTERNS (in src/) may include no header matching HEADER_PATTERNS.
bad=0
files=$(ls src/*.c src/*.h)
# The patterns are matched by case, not expanded as file names.
set -f
rule() {
	for f in $files; do
		base=${f#src/}
		base=${base%.*}
		hit=
		for p in $1; do
			# shellcheck disable=SC2254
			case $base in $p) hit=y; break ;; esac
		done
		[ -n "$hit" ] || continue
		# shellcheck disable=SC2013 # header names hold no spaces
		for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f"); do
			for p in $2; do
				# shellcheck disable=SC2254
				case $h in $p)
					echo "$f: includes $h.h ($3)"
					bad=1
					break ;;
				esac
			done
		done
	done
}

rule "mailbox reactor service buf uring net conn transport transport_*" \
    "tls tls_* deliver store store_* cluster cluster_* nats_link proto_*" \
    "the core includes no TLS, delivery, store, cluster or protocol header"
rule "proto_*" "store store_* cluster cluster_* nats_link" \
    "a protocol includes no store or cluster header"
exit $bad
