#!/bin/sh
# check-links.sh: every relative link in README.md and docs/*.md names a
# file or directory inside the repository, and a link's #anchor into a
# Markdown file names one of its headings (GitHub's slugs: lower case,
# punctuation dropped, spaces to hyphens). Links to http(s) and mailto
# are not followed; fenced code blocks are skipped.
#
#   tests/system/check-links.sh [FILE.md...]
#
# Run by `make check` (in check-dist.sh). Silent when every link resolves;
# otherwise prints "FILE: TARGET: why" for each broken one and exits 1.
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd -P)
[ $# -gt 0 ] || set -- README.md docs/*.md

# The anchors a Markdown file's headings make, one a line.
anchors() {
	awk '/^```/ { code = !code; next } !code' "$1" |
	    sed -n 's/^#\{1,6\} \{1,\}//p' |
	    tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# The targets of a file's inline links [text](target), one a line.
targets() {
	awk '/^```/ { code = !code; next } !code' "$1" |
	    grep -o '\]([^)[:space:]]*)' | sed 's/^](//; s/)$//'
}

bad=0
for f in "$@"; do
	if [ ! -f "$f" ]; then
		echo "$f: no such file"
		bad=1
		continue
	fi
	dir=$(dirname "$f")
	# The loop runs in a subshell: it reports through its exit status.
	targets "$f" | {
		b=0
		while IFS= read -r target; do
			case $target in
			''|http://*|https://*|mailto:*) continue ;;
			/*) echo "$f: $target: an absolute path"; b=1; continue ;;
			esac
			path=${target%%#*}
			anchor=
			case $target in *'#'*) anchor=${target#*#} ;; esac
			if [ -z "$path" ]; then
				file=$f
			else
				file=$dir/$path
			fi
			if [ ! -e "$file" ]; then
				echo "$f: $target: no such file"
				b=1
				continue
			fi
			real=$(realpath -- "$file")
			case $real/ in
			"$root"/*) ;;
			*) echo "$f: $target: outside the repository"; b=1; continue ;;
			esac
			case $file in
			*.md) ;;
			*) continue ;;
			esac
			if [ -n "$anchor" ] && ! anchors "$file" | grep -qx -- "$anchor"
			then
				echo "$f: $target: $file has no heading for #$anchor"
				b=1
			fi
		done
		exit $b
	} || bad=1
done
exit $bad
