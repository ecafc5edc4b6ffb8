#!/bin/sh
# check-layers.sh: the layers keep to their own headers. The core (the
# mailbox, the reactor, service threads, buffers, io_uring, sockets,
# connections and transports) includes no header of TLS, delivery, the
# store, the cluster or a protocol; a protocol includes no header of the
# store or the cluster; the configuration, the acceptor and conn.c reach
# TLS only through transport.h. Only the #include "..." lines of each
# module's own .c and .h count (not what those headers include in turn).
# And no file but conn.c and the transports reads a connection's fd.
#
#   tests/system/check-layers.sh
#
# Run by `make check` (in check-dist.sh) and `make check-layers`. Silent when
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

rule "mailbox reactor service buf uring net conn conn_set conn_int transport \
    transport_*" \
    "tls tls_* deliver store store_* cluster cluster_* nats_link proto_*" \
    "the core includes no TLS, delivery, store, cluster or protocol header"
rule "proto_*" "store store_* cluster cluster_* nats_link" \
    "a protocol includes no store or cluster header"
rule "config config_* cferr conn conn_set conn_int acceptor" \
    "tls tls_* transport_tls transport_tls_*" \
    "the configuration, the acceptor and conn.c reach TLS only through transport.h"

# A connection's socket (c->io.fd) is read only by conn.c and the
# transports; everyone else goes through them.
set +f
for f in src/*.c; do
	case ${f#src/} in conn.c | transport*.c) continue ;; esac
	if grep -n -- '->io\.fd' "$f" >/dev/null; then
		grep -n -- '->io\.fd' "$f" | sed "s|^|$f:|; s|\$| (only conn.c and the transports touch a connection's fd)|"
		bad=1
	fi
done
exit $bad
