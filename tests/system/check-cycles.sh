#!/bin/sh
# check-cycles.sh: no call cycle joins the modules a message passes
# through: delivery, the message, the store and its backends, the cluster
# and receipts. Module A calls module B when A's object file uses a symbol
# B's defines (nm); a cycle is a module that reaches itself that way.
#
#   tests/system/check-cycles.sh [BUILD]    (default: build/default)
#
# Looks at $BUILD/src/*.o, so run it after a build. Run by `make check`
# (in check-dist.sh) and `make check-cycles`. CHECK_CYCLES_MODULES (shell
# patterns of module names, space-separated) picks the modules no cycle
# may pass through; "*" checks every module. Silent when there is no such cycle; otherwise
# prints "cycle: a -> b -> ... -> a" for each module on one and exits 1.
# A module split over files that share a private header is one module:
# CHECK_CYCLES_PARTS lists them as "file:module" (default below).
set -u
cd "$(dirname "$0")/../.." || exit 1
build=${1:-${BUILD:-build/default}}
guarded=${CHECK_CYCLES_MODULES:-"deliver msg store store_* cluster cluster_* nats_link smpp_receipt"}
parts=${CHECK_CYCLES_PARTS:-"store_rows:store store_rcpt:store store_move:store cluster_kv:cluster cluster_send:cluster cluster_receipt:cluster
    conn_set:conn"}

objs=$(ls "$build"/src/*.o 2>/dev/null)
# module OBJECT: the module an object belongs to.
module() {
	m=$(basename "$1" .o)
	for p in $parts; do
		[ "$m" = "${p%%:*}" ] && m=${p#*:}
	done
	echo "$m"
}
if [ -z "$objs" ]; then
	echo "check-cycles: no objects in $build/src (build first)" >&2
	exit 2
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# "symbol module" for what each object defines (global and weak only),
# "module symbol" for what it uses.
for o in $objs; do
	m=$(module "$o")
	nm -P --defined-only "$o" | awk -v m="$m" '$2 ~ /^[A-Z]$/ { print $1, m }'
done >"$tmp/defs"
for o in $objs; do
	m=$(module "$o")
	nm -P -u "$o" | awk -v m="$m" '{ print m, $1 }'
done >"$tmp/uses"
# The edges "a b": a calls (or reads) b.
awk 'NR == FNR { def[$1] = $2; next }
    ($2 in def) && def[$2] != $1 { print $1, def[$2] }' \
    "$tmp/defs" "$tmp/uses" | sort -u >"$tmp/edges"

# Which modules are guarded: their names, one a line. (The patterns are
# matched by case, not expanded as file names.)
set -f
for o in $objs; do
	m=$(module "$o")
	for p in $guarded; do
		# shellcheck disable=SC2254
		case $m in $p) echo "$m"; break ;; esac
	done
done | sort -u >"$tmp/guarded"
set +f

# From each guarded module, a breadth-first search; one that gets back
# to itself prints the shortest way round.
awk 'NR == FNR { out[$1] = out[$1] " " $2; next }
{
	start = $1
	split("", parent); split("", seen)
	head = 1; tail = 0
	n = split(out[start], next_, " ")
	for (i = 1; i <= n; i++)
		if (!(next_[i] in seen)) {
			seen[next_[i]] = 1; parent[next_[i]] = start
			queue[++tail] = next_[i]
		}
	found = (start in seen)
	while (!found && head <= tail) {
		v = queue[head++]
		n = split(out[v], next_, " ")
		for (i = 1; i <= n; i++) {
			w = next_[i]
			if (w in seen)
				continue
			seen[w] = 1; parent[w] = v; queue[++tail] = w
			if (w == start) { found = 1; break }
		}
	}
	if (!found)
		next
	path = start; v = parent[start]
	while (v != start) { path = v " -> " path; v = parent[v] }
	print "cycle: " start " -> " path
	bad = 1
}
END { exit bad }' "$tmp/edges" "$tmp/guarded"
