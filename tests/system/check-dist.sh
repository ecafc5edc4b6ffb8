#!/bin/sh
# check-dist.sh: what ships besides the binary: units, man pages, the
# links of the README and docs/, install, and that no call cycle joins
# the modules of the message path in the objects built.
#
#   tests/system/check-dist.sh [--units-only]
#
# Run by `make check` (target check-dist) and, with --units-only, by
# `make lint`. Reads MAKE, BUILD and BIN from the environment (the Makefile
# sets them). Prints one "ok"/"not ok" line per check; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.." || exit 1

MAKE=${MAKE:-make}
BUILD=${BUILD:-build/default}
BIN=${BIN:-$BUILD/echorouterd}
MAX_EXPOSURE=${MAX_EXPOSURE:-2.0}
UNITS_ONLY=false
[ "${1:-}" = --units-only ] && UNITS_ONLY=true

failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/erd-dist.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

pass() { echo "ok - $*"; }
fail() { echo "not ok - $*"; failed=$((failed + 1)); }
skip() { echo "ok - # SKIP $*"; }
# check DESCRIPTION COMMAND...: passes if COMMAND succeeds silently.
check() {
	what=$1; shift
	if out=$("$@" 2>&1) && [ -z "$out" ]; then
		pass "$what"
	else
		fail "$what"
		printf '%s\n' "$out" | sed 's/^/    /'
	fi
}

# The units as shipped, but naming the binary and config of this tree.
units_for_tree() {
	mkdir -p "$tmp/units"
	for u in systemd/echorouterd.service systemd/*.socket; do
		sed -e "s|/usr/local/sbin/echorouterd|$PWD/$BIN|g" \
		    -e "s|/etc/echorouterd/|$PWD/conf/|g" "$u" \
		    >"$tmp/units/$(basename "$u")"
	done
}

check_units() {
	if ! command -v systemd-analyze >/dev/null; then
		skip "units: systemd-analyze missing (apt-get install systemd)"
		return
	fi
	units_for_tree
	check "systemd-analyze verify (ExecStart=$BIN)" \
	    systemd-analyze verify --man=no "$tmp"/units/*
	out=$(systemd-analyze security --offline=yes --no-pager \
	    "$tmp/units/echorouterd.service" 2>&1)
	score=$(printf '%s\n' "$out" |
	    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	if [ -n "$score" ] && awk -v s="$score" -v m="$MAX_EXPOSURE" \
	    'BEGIN { exit !(s <= m) }'; then
		pass "systemd-analyze security: exposure $score <= $MAX_EXPOSURE"
	else
		fail "systemd-analyze security: exposure '$score' > $MAX_EXPOSURE"
		printf '%s\n' "$out" | grep -v '✓' | sed 's/^/    /'
	fi
	check_socket_names
	check_state_dir
}

# The store lives in the unit's StateDirectory= (installed configuration)
# and, for make run, in the checkout (the sample's relative path).
check_state_dir() {
	if grep -qx 'StateDirectory=echorouterd' systemd/echorouterd.service
	then
		pass "echorouterd.service has StateDirectory=echorouterd"
	else
		fail "echorouterd.service has no StateDirectory=echorouterd"
	fi
	if grep -qx '  path = "store.db";' conf/echorouterd.conf; then
		pass "the sample's store is conf/store.db (make run as a user)"
	else
		fail "conf/echorouterd.conf: no store path = \"store.db\""
	fi
}

# Each socket unit names a default listener, and each default listener has
# a socket unit that echorouterd.socket pulls in.
check_socket_names() {
	all=""
	for u in systemd/*.socket; do
		n=$(sed -n 's/^FileDescriptorName=//p' "$u")
		all="$all $n "
		if grep -v '^[[:space:]]*#' conf/echorouterd.conf |
		    grep -q "name = \"$n\""; then
			pass "$u: FileDescriptorName=$n is a listener"
		else
			fail "$u: FileDescriptorName=$n: no such listener" \
			    "in conf/echorouterd.conf"
		fi
		case $u in
		systemd/echorouterd.socket) ;;
		*)	if grep -q "^Wants=.*$(basename "$u")" \
			    systemd/echorouterd.socket; then
				pass "echorouterd.socket pulls in $u"
			else
				fail "echorouterd.socket does not pull in $u"
			fi ;;
		esac
	done
	# The listeners the sample has (not the commented examples).
	for n in $(sed -n '/^[[:space:]]*#/d; s/.*{ *name = "\([^"]*\)".*/\1/p' \
	    conf/echorouterd.conf); do
		case $all in
		*" $n "*) pass "listener $n has a socket unit" ;;
		*) fail "listener $n has no socket unit in systemd/" ;;
		esac
	done
}

check_man() {
	if ! command -v mandoc >/dev/null; then
		fail "man pages: mandoc missing (apt-get install mandoc)"
		return
	fi
	for m in man/echorouterd.8 man/echorouterd.conf.5; do
		check "mandoc -Tlint -Wwarning $m" mandoc -Tlint -Wwarning "$m"
		if command -v man >/dev/null; then
			if MANWIDTH=80 man -l "$m" 2>/dev/null | grep -q '^NAME'
			then
				pass "man -l $m renders"
			else
				fail "man -l $m renders"
			fi
		else
			skip "man -l $m: man-db missing"
		fi
	done
}

# Every relative link of the README and docs/ names something in the tree.
check_links() {
	check "relative links in README.md and docs/*.md resolve" \
	    tests/system/check-links.sh
}

# No call cycle joins delivery, the store, its backends, the cluster and
# receipts in the objects of $BUILD (tests/system/check-cycles.sh).
check_cycles() {
	check "no call cycle joins deliver, msg, store, cluster, receipts" \
	    tests/system/check-cycles.sh "$BUILD"
}

# The core, the protocols and the configuration keep to their layers
# (tests/system/check-layers.sh).
check_layers() {
	check "the core and the protocols include only their layers' headers" \
	    tests/system/check-layers.sh
}

# expect_file PATH [MODE]
expect_file() {
	if [ ! -f "$1" ]; then
		fail "installed: $1"
	elif [ -n "${2:-}" ] && [ "$(stat -c %a "$1")" != "$2" ]; then
		fail "installed: $1 has mode $(stat -c %a "$1"), not $2"
	else
		pass "installed: ${1#"$tmp"/}"
	fi
}

# check_installed_store CONF: the installed configuration keeps its store
# in the unit's StateDirectory=, or has none when built without SQLite
# (such a build refuses a store group).
check_installed_store() {
	if "$BIN" -V 2>/dev/null | grep -q 'sqlite: no'; then
		if ! grep -q '^store = {' "$1"; then
			pass "installed config: no store (built without SQLite)"
		else
			fail "installed config has a store; the build has" \
			    "no SQLite"
		fi
	elif grep -qx '  path = "/var/lib/echorouterd/store.db";' "$1"; then
		pass "installed config: store.path is" \
		    "/var/lib/echorouterd/store.db"
	else
		fail "installed config: store.path is not" \
		    "/var/lib/echorouterd/store.db"
		grep -n 'path =' "$1" | sed 's/^/    /'
	fi
}

check_install() {
	d=$tmp/root
	unitdir=$(pkg-config --variable=systemdsystemunitdir systemd \
	    2>/dev/null)
	unitdir=${unitdir:-/lib/systemd/system}
	if ! $MAKE -s --no-print-directory install DESTDIR="$d" \
	    BUILD="$BUILD" >"$tmp/install.log" 2>&1; then
		fail "make install DESTDIR=..."
		sed 's/^/    /' "$tmp/install.log"
		return
	fi
	expect_file "$d/usr/local/sbin/echorouterd" 755
	expect_file "$d/usr/local/share/man/man8/echorouterd.8" 644
	expect_file "$d/usr/local/share/man/man5/echorouterd.conf.5" 644
	expect_file "$d$unitdir/echorouterd.service" 644
	expect_file "$d$unitdir/echorouterd.socket" 644
	expect_file "$d$unitdir/echorouterd-router.socket" 644
	expect_file "$d$unitdir/echorouterd-metrics.socket" 644
	expect_file "$d$unitdir/echorouterd-http.socket" 644
	expect_file "$d/etc/echorouterd/echorouterd.conf" 644
	if grep -qx 'ExecStart=/usr/local/sbin/echorouterd -c /etc/echorouterd/echorouterd.conf' \
	    "$d$unitdir/echorouterd.service"; then
		pass "installed unit runs the installed binary"
	else
		fail "installed unit runs the installed binary"
	fi
	if grep -qx 'StateDirectory=echorouterd' \
	    "$d$unitdir/echorouterd.service"; then
		pass "installed unit has StateDirectory=echorouterd"
	else
		fail "installed unit has StateDirectory=echorouterd"
	fi
	check_installed_store "$d/etc/echorouterd/echorouterd.conf"

	# A second install keeps the administrator's configuration.
	echo "# edited" >>"$d/etc/echorouterd/echorouterd.conf"
	$MAKE -s --no-print-directory install DESTDIR="$d" BUILD="$BUILD" \
	    >"$tmp/install2.log" 2>&1
	if tail -n 1 "$d/etc/echorouterd/echorouterd.conf" | grep -q edited
	then
		pass "make install keeps an existing configuration"
	else
		fail "make install keeps an existing configuration"
	fi

	# Other directories, and the unit follows them.
	d2=$tmp/root2
	$MAKE -s --no-print-directory install DESTDIR="$d2" BUILD="$BUILD" \
	    PREFIX=/opt/erd SYSCONFDIR=/opt/erd/etc UNITDIR=/opt/erd/units \
	    >"$tmp/install3.log" 2>&1
	expect_file "$d2/opt/erd/sbin/echorouterd" 755
	expect_file "$d2/opt/erd/share/man/man8/echorouterd.8" 644
	expect_file "$d2/opt/erd/etc/echorouterd/echorouterd.conf" 644
	if grep -qx 'ExecStart=/opt/erd/sbin/echorouterd -c /opt/erd/etc/echorouterd/echorouterd.conf' \
	    "$d2/opt/erd/units/echorouterd.service" 2>/dev/null; then
		pass "PREFIX, SYSCONFDIR and UNITDIR reach the unit"
	else
		fail "PREFIX, SYSCONFDIR and UNITDIR reach the unit"
	fi

	$MAKE -s --no-print-directory uninstall DESTDIR="$d" \
	    BUILD="$BUILD" >"$tmp/uninstall.log" 2>&1
	left=$(cd "$d" && find . -type f | sort | tr '\n' ' ')
	if [ "$left" = "./etc/echorouterd/echorouterd.conf " ]; then
		pass "make uninstall leaves only the configuration"
	else
		fail "make uninstall leaves only the configuration: $left"
	fi
}

check_units
if ! $UNITS_ONLY; then
	check_man
	check_links
	check_cycles
	check_layers
	check_install
fi
if [ "$failed" -gt 0 ]; then
	echo "check-dist: $failed check(s) failed"
	exit 1
fi
echo "check-dist: all passed"
