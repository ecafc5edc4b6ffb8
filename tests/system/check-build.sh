#!/bin/sh
# check-build.sh: the build options (WITH_SQLITE, WITH_NATS, WITH_TLS) and
# the recorded settings that make a change of flags rebuild.
#
#   tests/system/check-build.sh
#
# Run by `make check` (target check-build). Reads MAKE, BUILD and BIN from
# the environment (the Makefile sets them). Builds the daemon with every
# option off, at -O0 and in parallel, into $BUILD/check-build (its own
# directory, whatever the caller's SANITIZE, CFLAGS or options), then
# checks what -V, -t and the start-up log say, what make rebuilds, and how
# a missing library is reported. Prints one "ok"/"not ok" line per check;
# exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.." || exit 1

BUILD=${BUILD:-build/default}
BIN=${BIN:-$BUILD/echorouterd}
B=$BUILD/check-build
# The caller's command-line variables and jobserver stay out of these.
unset MAKEFLAGS MFLAGS MAKELEVEL
MAKE="${MAKE:-make} --no-print-directory -j$(nproc) V=0"

failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/erd-build.XXXXXX") || exit 1
pid=
trap 'rm -rf "$tmp"; [ -n "$pid" ] && kill "$pid" 2>/dev/null' EXIT
trap 'exit 1' INT TERM

pass() { echo "ok - $*"; }
fail() { echo "not ok - $*"; failed=$((failed + 1)); }
# expect DESCRIPTION COMMAND...
expect() {
	what=$1; shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
has() { grep -qF -- "$1" "$2"; }
# make with every option off; make with a pkg-config that knows no openssl.
make_off() { $MAKE WITH_SQLITE=no WITH_NATS=no WITH_TLS=no WITH_CURL=no "$@"; }
make_nolib() { $MAKE PKG_CONFIG="$tmp/pkg-config" BUILD="$tmp/nolib" "$@"; }
# What make compiled, one source per line.
compiled() { sed -n 's/^  CC *//p' "$1"; }

# --- every option off --------------------------------------------------

if ! make_off BUILD="$B" CFLAGS=-O0 "$B/echorouterd" >"$tmp/b1" 2>&1
then
	fail "make WITH_...=no CFLAGS=-O0 BUILD=$B"
	sed 's/^/    /' "$tmp/b1"
	exit 1
fi
pass "make WITH_...=no CFLAGS=-O0 BUILD=$B"

"$B/echorouterd" -V >"$tmp/v" 2>&1
v='echorouterd [0-9.]* (io_uring: liburing [0-9.]*;'
expect "-V: $(cat "$tmp/v")" \
    grep -qx "$v sqlite: no; nats: no; tls: no; curl: no)" "$tmp/v"
expect "the binary loads none of the built-out libraries" \
    sh -c "! ldd '$B/echorouterd' | grep -E 'libsqlite3|libnats|libssl'"

# Each feature's setting names its build option, at its own line.
cat >"$tmp/feat.conf" <<'EOF'
listeners = (
  { name = "e"; address = "127.0.0.1"; port = 0; protocol = "echo";
    tls = { cert = "/etc/ssl/c.pem"; }; }
);
store = { path = "/var/lib/echorouterd/store.db"; };
cluster = { url = "nats://127.0.0.1:4222"; };
EOF
"$B/echorouterd" -t -c "$tmp/feat.conf" >"$tmp/t" 2>&1
expect "-t with built-out features exits 1" [ $? = 1 ]
for want in 3:tls:WITH_TLS 5:store:WITH_SQLITE 6:cluster:WITH_NATS; do
	IFS=: read -r line key opt <<-EOF
	$want
	EOF
	want="$tmp/feat.conf:$line: \"$key\" needs echorouterd built with $opt"
	want="$want (this build has it off)"
	expect "-t: ${want#"$tmp"/}" has "$want" "$tmp/t"
done
expect "-t: three errors, no others" [ "$(wc -l <"$tmp/t")" = 3 ]

# The same line at start, at info (<6> when stderr is the journal's).
cat >"$tmp/run.conf" <<'EOF'
dispatchers = 1;
listeners = (
  { name = "e"; address = "127.0.0.1"; port = 0; protocol = "echo"; }
);
EOF
: >"$tmp/log"
stream=$(stat -c %d:%i "$tmp/log")
JOURNAL_STREAM=$stream "$B/echorouterd" -c "$tmp/run.conf" 2>>"$tmp/log" &
pid=$!
for _ in $(seq 100); do
	grep -q started "$tmp/log" && break
	sleep 0.05
done
kill "$pid"
wait "$pid"
pid=
expect "start-up log: <6>$(cat "$tmp/v")" has "<6>$(cat "$tmp/v")" "$tmp/log"

# --- settings that rebuild ---------------------------------------------

make_off BUILD="$B" CFLAGS=-O0 "$B/echorouterd" >"$tmp/b2" 2>&1
expect "the same settings again compile nothing" \
    [ -z "$(compiled "$tmp/b2")" ]
make_off BUILD="$B" CFLAGS="-O0 -g1" "$B/echorouterd" >"$tmp/b3" 2>&1
expect "another CFLAGS compiles every object again ($(compiled "$tmp/b3" |
    wc -l) of $(compiled "$tmp/b1" | wc -l))" \
    [ "$(compiled "$tmp/b3" | sort)" = "$(compiled "$tmp/b1" | sort)" ]
expect "$B/.make-settings records CFLAGS = -O0 -g1" \
    grep -qx 'CFLAGS = -O0 -g1' "$B/.make-settings"
$MAKE WITH_SQLITE=no WITH_NATS=no WITH_TLS=auto BUILD="$B" \
    CFLAGS="-O0 -g1" "$B/.make-settings" >/dev/null 2>&1
if grep -qx 'WITH_TLS = auto: yes' "$B/.make-settings"; then
	make_off BUILD="$B" CFLAGS="-O0 -g1" "$B/echorouterd" \
	    >"$tmp/b4" 2>&1
	expect "another option rebuilds too" [ -n "$(compiled "$tmp/b4")" ]
fi

# --- a library that is missing -------------------------------------------

# A pkg-config that knows no openssl.
cat >"$tmp/pkg-config" <<'EOF'
#!/bin/sh
for a; do
	[ "$a" = openssl ] && PKG_CONFIG_LIBDIR=/nonexistent exec pkg-config "$@"
done
exec pkg-config "$@"
EOF
chmod +x "$tmp/pkg-config"
make_nolib WITH_TLS=yes "$tmp/nolib/echorouterd" >"$tmp/yes" 2>&1
expect "WITH_TLS=yes without openssl: the build fails" [ $? != 0 ]
expect "... saying so" \
    has "WITH_TLS=yes but pkg-config finds no openssl (Debian: libssl-dev)" \
    "$tmp/yes"
expect "... before compiling anything" [ -z "$(compiled "$tmp/yes")" ]
make_nolib WITH_TLS=yes help >/dev/null 2>&1
expect "make help does not mind" [ $? = 0 ]
make_nolib WITH_TLS=auto "$tmp/nolib/.make-settings" >/dev/null 2>&1
expect "WITH_TLS=auto without openssl: off" \
    grep -qx 'WITH_TLS = auto: no' "$tmp/nolib/.make-settings"
expect "WITH_TLS=nonsense is refused" \
    sh -c "! $MAKE WITH_TLS=nonsense help >/dev/null 2>&1"

# --- an option's modules -------------------------------------------------

# In a copy of the tree with a module of each option (empty), a dry run
# shows which make would compile.
mkdir -p "$tmp/tree/tests/bench" "$tmp/tree/tests/fuzz" "$tmp/tree/tests/stress"
cp -r Makefile src "$tmp/tree/"
for f in tests/bench/bench.mk tests/fuzz/fuzz.mk tests/stress/stress.mk; do
	cp "$f" "$tmp/tree/$f"
done
mods="store_sqlite store_jetstream cluster cluster_send cluster_kv nats_link transport_tls transport_tls_ktls"
for m in $mods; do
	: >"$tmp/tree/src/$m.c"
done
(cd "$tmp/tree" && make_off -n BUILD=b b/echorouterd) >"$tmp/n-off" 2>&1
(cd "$tmp/tree" && $MAKE -n WITH_SQLITE=yes WITH_NATS=yes WITH_TLS=yes \
    BUILD=b b/echorouterd) >"$tmp/n-on" 2>&1
off=0
on=0
for m in $mods; do
	grep -q "src/$m\.c" "$tmp/n-off" && off=$((off + 1))
	grep -q "src/$m\.c" "$tmp/n-on" && on=$((on + 1))
done
expect "options off: none of $mods compiled" [ "$off" = 0 ]
expect "options on: all of them compiled" [ "$on" = 8 ]

# --- this build ---------------------------------------------------------

# -V of the tested binary agrees with the options its settings record.
if [ -f "$BUILD/.make-settings" ] && [ -x "$BIN" ]; then
	want=""
	for o in sqlite:SQLITE nats:NATS tls:TLS curl:CURL; do
		v=$(sed -n "s/^WITH_${o#*:} = .*: //p" "$BUILD/.make-settings")
		want="$want; ${o%%:*}: $v"
	done
	expect "$BIN -V agrees with $BUILD/.make-settings (${want#; })" \
	    sh -c "'$BIN' -V | grep -qF -- '$want)'"
fi

if [ "$failed" -gt 0 ]; then
	echo "check-build: $failed check(s) failed"
	exit 1
fi
echo "check-build: all passed"
