# shellcheck shell=bash
# pinned.sh: helpers of the benchmarks that pin servers and generators to
# CPUs of their own (scale-store, split-upstream), sourced by them. They
# run from a build or from a bundle (../README.md: "Many cores").
#
# Uses: top (the source tree), BUNDLE, ERD, LG, DRAIN, PINNED_NAME (for
# log lines), res (the results file) and round (the round) of the caller.

# prog NAME: the command that runs program NAME.
prog() {
	if [[ -n ${BUNDLE:-} ]]; then
		echo "$BUNDLE/x $1"
	else
		case $1 in
		echorouterd) echo "${ERD:-$top/build/default/echorouterd}" ;;
		loadgen) echo "${LG:-$top/build/default/loadgen}" ;;
		drain) echo "${DRAIN:-$top/build/default/drain}" ;;
		*) command -v "$1" ;;
		esac
	fi
}
# on CPUS NAME ARGS...: program NAME pinned to CPUS.
on() {
	local cpus=$1 name=$2
	shift 2
	# exec: a server started with "on ... &" keeps $!'s PID.
	# shellcheck disable=SC2046
	exec $(prog taskset) -c "$cpus" $(prog "$name") "$@"
}
log() { echo "${PINNED_NAME:-bench}: $*" >&2; }

freeport() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 30000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
	return 1
}

# threads PID: "name=cpu_ticks" for each of PID's threads.
threads() {
	local t
	for t in /proc/"$1"/task/*; do
		awk '{sub(/^[^(]*\(/, ""); n = $0; sub(/\).*/, "", n);
		    sub(/^[^)]*\) /, ""); printf "%s=%d\n", n, $12 + $13}' \
		    "$t/stat" 2>/dev/null
	done
}
# busy BEFORE AFTER SECS: the cores each thread name used between two
# threads snapshots (threads of one name summed).
busy() {
	awk -v secs="$3" -v hz="$(getconf CLK_TCK)" -F= '
	    NR == FNR { b[$1] += $2; next } { a[$1] += $2 }
	    END { for (n in a) printf " %s=%.2f", n, (a[n] - b[n]) / hz / secs;
	          print "" }' <(echo "$1") <(echo "$2")
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
stop() { kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

# result KEY LINE: keep a RESULT line, its rate and CPU per message.
declare -A RATES CPUS
result() {
	local key=$1 line=$2 rate cpu n
	# shellcheck disable=SC2154 # the caller's
	echo "round=$round key=$key $line" | tee -a "$res"
	rate=$(sed -n 's/.* rate=\([0-9.]*\).*/\1/p' <<<"$line")
	cpu=$(sed -n 's/.* srv_cpu_us=\([0-9]*\).*/\1/p' <<<"$line")
	n=$(sed -n 's/.* msgs=\([0-9]*\).*/\1/p' <<<"$line")
	[[ -n $rate ]] && RATES[$key]+=" $rate"
	if [[ -n $cpu && -n $n && $n != 0 ]]; then
		CPUS[$key]+=" $(awk -v c="$cpu" -v n="$n" 'BEGIN {printf "%.2f", c / n}')"
	fi
}

# median: of the numbers on stdin ("-" for none).
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {
	if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2];
	else printf "%.2f\n", (a[NR/2] + a[NR/2+1]) / 2 }'; }
