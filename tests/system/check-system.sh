#!/usr/bin/env bash
# check-system.sh: echorouterd under a real systemd, booted in a container.
#
# Run by `make check-system` (root only; not part of `make check`). It
#  1. installs systemd-container and debootstrap with apt-get if missing;
#  2. builds (once per set of packages, then cached) a minimal Debian with
#     debootstrap from this machine's apt mirror, under .cache/check-system/
#     (CHECK_SYSTEM_CACHE), holding systemd and the packages of every
#     library the binary loads (ldd + dpkg -S: liburing2, and those of the
#     build options that are on);
#  3. copies it, runs `make install DESTDIR=<copy>` into it, boots it with
#     systemd-nspawn --register=no --keep-unit (sharing the host network), and
#  4. checks the service: direct and socket-activated start, STATUS text,
#     echo from the host over loopback, reload keeping the main PID, a bad
#     reload, a stalled reactor ending in a watchdog restart, stop, and
#     journal lines with priorities.
# Every wait is bounded. Skips (exit 0) when not root or the tools are
# missing; exits 1 if a check fails. KEEP=1 keeps the container's copy.
set -u
cd "$(dirname "$0")/../.." || exit 1

MAKE=${MAKE:-make}
BUILD=${BUILD:-build/default}
BIN=${BIN:-$BUILD/echorouterd}
SYSTEM_DEPS=${SYSTEM_DEPS:-systemd-container debootstrap}
CACHE=${CHECK_SYSTEM_CACHE:-$PWD/.cache/check-system}
# What the image holds besides the packages of the libraries $BIN loads
# (image_pkgs); a different set makes a new image.
BASE_PKGS="systemd systemd-sysv procps"
IMAGE_VERSION=2

failed=0
passed=0
run=
nspawn_pid=
leader=

say() { printf '%s\n' "check-system: $*"; }
pass() { echo "ok - $*"; passed=$((passed + 1)); }
fail() { echo "not ok - $*"; failed=$((failed + 1)); }
skip_all() {
	say "SKIP: $*"
	exit 0
}
die() {
	say "ERROR: $*"
	exit 1
}

preflight() {
	[ "$(id -u)" = 0 ] ||
	    skip_all "needs root (systemd-nspawn, debootstrap); run: sudo make check-system"
	local missing=""
	command -v systemd-nspawn >/dev/null || missing="$missing systemd-container"
	command -v debootstrap >/dev/null || missing="$missing debootstrap"
	if [ -n "$missing" ] && command -v apt-get >/dev/null; then
		say "installing:$missing"
		timeout 600 apt-get update -qq
		DEBIAN_FRONTEND=noninteractive timeout 600 \
		    apt-get install -y -qq $missing
	fi
	command -v systemd-nspawn >/dev/null ||
	    skip_all "systemd-nspawn missing (apt-get install systemd-container)"
	command -v debootstrap >/dev/null ||
	    skip_all "debootstrap missing (apt-get install debootstrap)"
	command -v nsenter >/dev/null || skip_all "nsenter missing (util-linux)"
	[ -x "$BIN" ] || die "$BIN is not built"
}

# The suite of this machine and the first mirror apt uses for it.
host_suite() {
	. /etc/os-release
	echo "${VERSION_CODENAME:-bookworm}"
}

apt_mirror() {
	local m
	if [ -n "${CHECK_SYSTEM_MIRROR:-}" ]; then
		echo "$CHECK_SYSTEM_MIRROR"
		return
	fi
	m=$(awk '/^URIs:/ && !done { print $2; done = 1 }' \
	    /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
	[ -n "$m" ] || m=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++)
	    if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; exit } }' \
	    /etc/apt/sources.list 2>/dev/null)
	echo "${m:-http://deb.debian.org/debian}"
}

# The Debian package that holds the file $1 (usrmerge: dpkg may know it
# under /lib or under /usr/lib).
owner_pkg() {
	local p alt
	for p in "$1" "$(readlink -f "$1")"; do
		alt=${p#/usr}
		[ "$alt" = "$p" ] && alt=/usr$p
		for f in "$p" "$alt"; do
			dpkg -S "$f" 2>/dev/null | sed -n '1s/:.*//p' | grep . &&
			    return 0
		done
	done
	return 1
}

# BASE_PKGS and the packages of every shared library $BIN loads
# (liburing2, and those of the build options that are on), sorted,
# comma-separated: the binary installed into the image must start there.
image_pkgs() {
	local lib pkg pkgs
	read -r -a pkgs <<<"$BASE_PKGS"
	for lib in $(ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
	do
		pkg=$(owner_pkg "$lib") || {
			say "ERROR: no Debian package holds $lib ($BIN loads it)" >&2
			return 1
		}
		pkgs+=("$pkg")
	done
	printf '%s\n' "${pkgs[@]}" | sort -u | paste -sd, -
}

# Makes (or reuses) the cached image; prints its path.
ensure_image() {
	local suite mirror img tmp sum
	suite=$(host_suite)
	IMAGE_PKGS=$(image_pkgs) || exit 1
	sum=$(printf '%s' "$IMAGE_PKGS" | md5sum | cut -c1-8)
	img=$CACHE/debian-$suite-$(dpkg --print-architecture)-v$IMAGE_VERSION-$sum
	if [ -x "$img/lib/systemd/systemd" ]; then
		say "using the cached image $img" >&2
		echo "$img"
		return
	fi
	mirror=$(apt_mirror)
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/new.XXXXXX")
	say "debootstrap $suite from $mirror with $IMAGE_PKGS" \
	    "(once; cached in $CACHE)" >&2
	if ! timeout 1200 debootstrap --variant=minbase \
	    --include="$IMAGE_PKGS" "$suite" "$tmp" "$mirror" \
	    >"$tmp.log" 2>&1; then
		tail -n 20 "$tmp.log" >&2
		rm -rf "$tmp"
		die "debootstrap failed (log above, full: $tmp.log)"
	fi
	# Quieter boots: no login prompts, no periodic jobs.
	for u in console-getty.service getty@.service apt-daily.timer \
	    apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
	    fstrim.timer; do
		ln -sf /dev/null "$tmp/etc/systemd/system/$u"
	done
	echo erd-check >"$tmp/etc/hostname"
	# mktemp made it 0700: the container's / must be 0755.
	chmod 0755 "$tmp"
	rm -f "$tmp.log"
	mv "$tmp" "$img"
	echo "$img"
}

# A free TCP port on the host's loopback (the container shares it).
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	die "no free port found"
}

# listen_on ROOT UNIT PORT: a drop-in moving a socket unit to PORT.
listen_on() {
	mkdir -p "$1/etc/systemd/system/$2.d"
	printf '[Socket]\nListenStream=\nListenStream=127.0.0.1:%s\n' "$3" \
	    >"$1/etc/systemd/system/$2.d/port.conf"
}

# Installs the build into the container tree. The listeners and their
# socket units move from 7007 and 7010 (the host may use them) to free
# ports.
install_into() {
	local root=$1
	$MAKE -s --no-print-directory install DESTDIR="$root" BUILD="$BUILD" \
	    >/dev/null || die "make install DESTDIR=$root failed"
	sed -i -e "s/port = 7007;/port = $ECHO_PORT;/" \
	    -e "s/port = 7010;/port = $ROUTER_PORT;/" \
	    -e "s/port = 9477;/port = $METRICS_PORT;/" \
	    "$root/etc/echorouterd/echorouterd.conf"
	listen_on "$root" echorouterd.socket "$ECHO_PORT"
	listen_on "$root" echorouterd-router.socket "$ROUTER_PORT"
	listen_on "$root" echorouterd-metrics.socket "$METRICS_PORT"
	add_tls_listener "$root"
}

# add_tls_listener ROOT: an echo listener over TLS on TLS_PORT, its key
# handed to the DynamicUser service the documented way: root's file, mode
# 0600, passed with LoadCredential= in a drop-in.
add_tls_listener() {
	local root=$1 etc=$1/etc/echorouterd
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
	    -addext subjectAltName=IP:127.0.0.1 -keyout "$etc/tls-key.pem" \
	    -out "$etc/tls-cert.pem" 2>/dev/null ||
	    die "openssl could not make a test certificate"
	chmod 0600 "$etc/tls-key.pem"
	chmod 0644 "$etc/tls-cert.pem"
	cp "$etc/tls-cert.pem" "$run/tls-cert.pem"
	sed -i "s|protocol = \"metrics\"; }|protocol = \"metrics\"; },\n\
  { name = \"tlsecho\"; address = \"127.0.0.1\"; port = $TLS_PORT; \
protocol = \"echo\";\n    tls = { certificate = \"/etc/echorouterd/tls-cert.pem\"; \
key = \"/run/credentials/echorouterd.service/tls-key.pem\"; }; }|" \
	    "$etc/echorouterd.conf"
	mkdir -p "$root/etc/systemd/system/echorouterd.service.d"
	printf '[Service]\nLoadCredential=tls-key.pem:/etc/echorouterd/tls-key.pem\n' \
	    >"$root/etc/systemd/system/echorouterd.service.d/tls.conf"
}

# tls_line PORT TEXT: sends a line over TLS from the host; prints the answer.
tls_line() {
	{ printf '%s\n' "$2"; sleep 2; } | timeout 5 openssl s_client -quiet \
	    -connect "127.0.0.1:$1" -CAfile "$run/tls-cert.pem" \
	    -verify_return_error 2>/dev/null | head -n 1
}

cleanup() {
	if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
		# SIGTERM asks the container's systemd to power off.
		kill -TERM "$nspawn_pid" 2>/dev/null
		for _ in $(seq 1 100); do
			kill -0 "$nspawn_pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$nspawn_pid" 2>/dev/null
		wait "$nspawn_pid" 2>/dev/null
	fi
	if [ -n "$run" ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$run"
	elif [ -n "$run" ]; then
		say "kept $run"
	fi
}

boot() {
	local root=$1
	systemd-nspawn --register=no --keep-unit --quiet --boot \
	    --directory="$root" --machine="erd-check-$$" --link-journal=no \
	    --resolv-conf=off --timezone=off --console=read-only \
	    >"$run/console.log" 2>&1 </dev/null &
	nspawn_pid=$!
	# The container's PID 1 is the child of nspawn that runs systemd (an
	# intermediate child comes and goes first).
	for _ in $(seq 1 150); do
		leader=
		for c in $(pgrep -P "$nspawn_pid"); do
			[ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] &&
			    leader=$c
		done
		[ -n "$leader" ] && break
		kill -0 "$nspawn_pid" 2>/dev/null || break
		sleep 0.2
	done
	[ -n "$leader" ] || {
		tail -n 30 "$run/console.log"
		die "the container did not start"
	}
	local state=
	# Until PID 1 has its socket up, systemctl cannot even connect.
	for _ in $(seq 1 90); do
		state=$(in_ct 90 systemctl is-system-running --wait 2>&1)
		case $state in
		*"connect to bus"*) sleep 1 ;;
		*) break ;;
		esac
	done
	case $state in
	running | degraded) say "container booted ($state), PID 1 is host PID $leader" ;;
	*)
		tail -n 30 "$run/console.log"
		die "the container did not boot: '$state'"
		;;
	esac
}

# in_ct SECONDS COMMAND...: runs a command inside the container, bounded.
in_ct() {
	local t=$1
	shift
	timeout "$t" nsenter --target "$leader" --all -- "$@"
}

sctl() { in_ct 30 systemctl --no-pager "$@"; }
prop() { sctl show -p "$2" --value "$1"; }

# Sends a line to 127.0.0.1:$port from the host; prints what comes back.
echo_line() {
	local port=$1 text=$2 line=""
	exec 5<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s\n' "$text" >&5
	read -r -t 5 line <&5
	exec 5>&- 5<&-
	printf '%s' "$line"
}

# metrics_has PORT PATTERN: GET /metrics from the host; whether the answer
# is a 200 whose body has a line matching PATTERN.
metrics_has() {
	local port=$1 pat=$2 reply
	exec 5<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET /metrics HTTP/1.0\r\n\r\n' >&5
	reply=$(timeout 5 cat <&5)
	exec 5>&- 5<&-
	[[ $reply == "HTTP/1.1 200 OK"* ]] && grep -q -- "$pat" <<<"$reply"
}

# expect DESCRIPTION COMMAND...
expect() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

# wait_for SECONDS COMMAND...: polls every 0.2 s.
wait_for() {
	local n=$(($1 * 5))
	shift
	for _ in $(seq 1 "$n"); do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}

is_active() { [ "$(prop "$1" ActiveState)" = active ]; }
is_inactive() { [ "$(prop "$1" ActiveState)" = inactive ]; }
journal_has() { in_ct 30 journalctl -q -u echorouterd --no-pager "${@:2}" | grep -q -- "$1"; }
status_has() { sctl status echorouterd 2>&1 | grep -q -- "$1"; }

test_direct_start() {
	local port=$ECHO_PORT pid
	expect "systemctl start echorouterd.service (direct)" \
	    sctl start echorouterd.service
	expect "service is active" is_active echorouterd.service
	expect "the socket unit was not pulled in" \
	    is_inactive echorouterd.socket
	pid=$(prop echorouterd.service MainPID)
	expect "listener bound by the daemon, not passed" \
	    eval '! journal_has "(socket activation)" _PID='"$pid"
	expect "echo from the host over loopback" \
	    eval '[ "$(echo_line '"$port"' hello-direct)" = hello-direct ]'
	expect "router PING from the host over loopback" \
	    eval '[ "$(echo_line '"$ROUTER_PORT"' "PING direct")" = "PONG direct" ]'
	expect "echo over TLS (key passed with LoadCredential=)" \
	    eval '[ "$(tls_line '"$TLS_PORT"' hello-tls)" = hello-tls ]'
	expect "metrics endpoint answers, counting the echo message" \
	    metrics_has "$METRICS_PORT" \
	    '^echorouterd_messages_total{protocol="echo"} [1-9]'
	expect "systemctl status shows the STATUS text" \
	    status_has 'Status: "[0-9]* connections (per reactor: .*messages/s[^"]*"'
	sctl status echorouterd.service | sed -n '1,12p' | sed 's/^/    /'
}

test_reload() {
	local port=$ECHO_PORT pid conf=/etc/echorouterd/echorouterd.conf
	pid=$(prop echorouterd.service MainPID)
	expect "systemctl reload" sctl reload echorouterd.service
	expect "reload keeps the main PID ($pid)" \
	    eval '[ "$(prop echorouterd.service MainPID)" = '"$pid"' ]'
	expect "journal: reloaded" wait_for 10 journal_has "reloaded $conf"
	in_ct 10 cp "$conf" "$conf.good"
	in_ct 10 sh -c "echo 'no_such_key = 1;' >>$conf"
	expect "systemctl reload with a bad file" sctl reload echorouterd
	expect "journal: bad file reported with FILE:LINE" \
	    wait_for 10 journal_has "$conf:[0-9]*: no_such_key"
	expect "bad reload keeps the service and its PID" \
	    eval '[ "$(prop echorouterd.service MainPID)" = '"$pid"' ] && is_active echorouterd.service'
	expect "still echoes after the bad reload" \
	    eval '[ "$(echo_line '"$port"' after-bad-reload)" = after-bad-reload ]'
	in_ct 10 mv "$conf.good" "$conf"
}

# router_talk PORT LINE...: sends the lines on one connection and prints
# every line that comes back within 3 s of the last.
router_talk() {
	local port=$1 line
	shift
	exec 5<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s\n' "$@" >&5
	while read -r -t 3 line <&5; do
		printf '%s\n' "$line"
	done
	exec 5>&- 5<&-
}

# A message stored for an offline account survives systemctl restart,
# in the installed store under StateDirectory.
test_store() {
	local conf=/etc/echorouterd/echorouterd.conf out id
	in_ct 10 cp "$conf" "$conf.nostore"
	in_ct 10 sh -c "printf '%s\\n' 'accounts = ( { id = \"alice\"; password = \"a\"; }, { id = \"bob\"; password = \"b\"; } );' >>$conf"
	expect "restart with accounts" sctl restart echorouterd.service
	out=$(router_talk "$ROUTER_PORT" "LOGIN alice a" "SEND bob kept-across-restart")
	id=$(printf '%s\n' "$out" | sed -n 's/^OK \([0-9][0-9]*\)$/\1/p')
	expect "SEND to offline bob acknowledged (OK <id>)" [ -n "$id" ]
	expect "the store is in the state directory" \
	    in_ct 10 test -s /var/lib/echorouterd/store.db
	expect "systemctl restart" sctl restart echorouterd.service
	expect "journal: the store had 1 message waiting" \
	    wait_for 10 journal_has "store.db: 1 messages waiting"
	out=$(router_talk "$ROUTER_PORT" "LOGIN bob b")
	expect "bob logs in after the restart and gets it" \
	    eval '[ "$(printf "%s\n" "$out" | grep "^MSG ")" = "MSG $id alice kept-across-restart" ]'
	in_ct 10 mv "$conf.nostore" "$conf"
	sctl restart echorouterd.service
}

test_stop() {
	expect "systemctl stop" sctl stop echorouterd.service
	expect "service is inactive" is_inactive echorouterd.service
	expect "stopped cleanly (Result=success, status 0)" \
	    eval '[ "$(prop echorouterd.service Result)" = success ] &&
	    [ "$(prop echorouterd.service ExecMainStatus)" = 0 ]'
	expect "journal: STOPPING and drain logged" \
	    journal_has "shutting down"
}

test_socket_activation() {
	local port=$ECHO_PORT
	expect "systemctl start echorouterd.socket" \
	    sctl start echorouterd.socket
	expect "echorouterd-router.socket pulled in" \
	    is_active echorouterd-router.socket
	expect "service not started before a client" \
	    is_inactive echorouterd.service
	expect "echo through the socket unit (starts the service)" \
	    eval '[ "$(echo_line '"$port"' hello-activated)" = hello-activated ]'
	expect "service is active" wait_for 10 is_active echorouterd.service
	expect "the daemon took both passed sockets" \
	    eval 'journal_has "name=echo .*(socket activation)" &&
	    journal_has "name=router .*(socket activation)"'
	expect "router PING through the passed socket" \
	    eval '[ "$(echo_line '"$ROUTER_PORT"' "PING act")" = "PONG act" ]'
	expect "echorouterd-metrics.socket pulled in" \
	    is_active echorouterd-metrics.socket
	expect "metrics through the passed socket" \
	    metrics_has "$METRICS_PORT" '^echorouterd_build_info{version='
	expect "the daemon took the metrics socket" \
	    journal_has "name=metrics .*(socket activation)"
	expect "systemctl status shows the STATUS text" \
	    status_has 'Status: "[0-9]* connections (per reactor: '
	sctl stop echorouterd.socket echorouterd-router.socket \
	    echorouterd-metrics.socket echorouterd-http.socket
	expect "stop after socket activation" sctl stop echorouterd.service
	expect "service is inactive" is_inactive echorouterd.service
}

restarts() { prop echorouterd.service NRestarts; }

restarted_since() {
	[ "$(restarts)" -gt "$1" ] && is_active echorouterd.service &&
	    [ "$(prop echorouterd.service MainPID)" != "$2" ]
}

test_watchdog() {
	local port=$ECHO_PORT dir=/etc/systemd/system/echorouterd.service.d pid n
	# Test only: arm the stall hook and shorten the watchdog.
	in_ct 10 mkdir -p "$dir"
	in_ct 10 sh -c "printf '[Service]\nEnvironment=ECHOROUTERD_TEST_STALL=60\nWatchdogSec=3s\nLimitCORE=0\n' >$dir/test-fault.conf"
	sctl daemon-reload
	expect "start with the test fault hook" sctl start echorouterd.service
	pid=$(prop echorouterd.service MainPID)
	n=$(restarts)
	sleep 2
	expect "healthy: no restart while reactors turn" \
	    eval '[ "$(restarts)" = '"$n"' ] && [ "$(prop echorouterd.service MainPID)" = '"$pid"' ]'
	sctl kill -s SIGUSR2 echorouterd.service
	say "reactor 0 stalled in PID $pid; waiting for the watchdog"
	expect "stalled reactor: watchdog restart (new PID)" \
	    wait_for 30 restarted_since "$n" "$pid"
	expect "journal: the daemon withheld WATCHDOG=1" \
	    journal_has "withholding WATCHDOG=1"
	expect "journal: systemd saw the watchdog timeout" \
	    eval 'in_ct 30 journalctl -q --no-pager -b | grep -q "echorouterd.service: Watchdog timeout"'
	expect "echo after the restart" \
	    wait_for 10 eval '[ "$(echo_line '"$port"' after-restart 2>/dev/null)" = after-restart ]'
	in_ct 10 rm -f "$dir/test-fault.conf"
	sctl daemon-reload
	sctl stop echorouterd.service
}

test_journal() {
	local out
	expect "journal: errors at priority err (3)" \
	    journal_has "withholding WATCHDOG=1" -p err
	expect "journal: notices at priority notice, not above" \
	    eval 'journal_has "started:" -p notice && ! journal_has "started:" -p warning'
	expect "journal: info lines at priority info (6)" \
	    eval 'journal_has "listening name=echo" PRIORITY=6'
	expect "journal: no raw <N> prefixes" \
	    eval '! journal_has ": <[0-7]>"'
	# The unit's SystemCallFilter lets the reactors batch and schedule.
	expect "journal: io_uring and SCHED_BATCH not refused by the unit" \
	    eval '! journal_has "io_uring unavailable" &&
	    ! journal_has "SCHED_BATCH refused"'
	out=$(in_ct 30 journalctl -q -u echorouterd --no-pager -o short \
	    -p warning | tail -n 5)
	printf '%s\n' "$out" | sed 's/^/    /'
}

main() {
	local img
	preflight
	img=$(ensure_image) || exit 1
	mkdir -p "$CACHE"
	run=$(mktemp -d "$CACHE/run.XXXXXX")
	trap cleanup EXIT
	trap 'exit 1' INT TERM
	say "copying the image to $run/root"
	cp -a "$img" "$run/root" || die "copy failed"
	chmod 0755 "$run/root"
	ECHO_PORT=$(free_port)
	ROUTER_PORT=$(free_port)
	METRICS_PORT=$(free_port)
	TLS_PORT=$(free_port)
	[ "$ECHO_PORT" != "$ROUTER_PORT" ] || ROUTER_PORT=$(free_port)
	install_into "$run/root"
	say "installed $BIN into the container; listeners echo on" \
	    "127.0.0.1:$ECHO_PORT, router on 127.0.0.1:$ROUTER_PORT"
	boot "$run/root"
	test_direct_start
	test_reload
	test_store
	test_stop
	test_socket_activation
	test_watchdog
	test_journal
	say "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}

main "$@"
