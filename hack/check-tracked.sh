#!/usr/bin/env bash
# check-tracked.sh refuses build outputs in git: tracked executables (ELF or Mach-O binaries,
# or files with an executable bit that are not scripts) and tracked files over 2 MB, golden
# files (a name containing "golden") excepted. `make verify` runs it; run it from anywhere.
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

limit=$((2 * 1024 * 1024))
bad=0
# -z: any file name, including ones with newlines. --stage: the mode as git will check it out.
while IFS= read -r -d '' entry; do
	meta=${entry%%$'\t'*}
	path=${entry#*$'\t'}
	mode=${meta%% *}
	[ -f "$path" ] || continue # deleted in the work tree; git will tell
	magic=$(head -c 4 -- "$path" | od -An -tx1 | tr -d ' \n')
	case "$magic" in
	7f454c46 | feedface | feedfacf | cefaedfe | cffaedfe | cafebabe)
		echo "tracked executable (binary): $path"
		bad=1
		continue
		;;
	esac
	if [ "$mode" = 100755 ] && [ "$(head -c 2 -- "$path")" != '#!' ]; then
		echo "tracked executable (mode 755, not a script): $path"
		bad=1
		continue
	fi
	size=$(stat -c %s -- "$path" 2>/dev/null || stat -f %z -- "$path")
	if [ "$size" -gt "$limit" ]; then
		case "$(basename -- "$path")" in
		*golden*) ;;
		*)
			echo "tracked file over 2 MB ($size bytes): $path"
			bad=1
			;;
		esac
	fi
done < <(git ls-files -z --stage)

if [ "$bad" -ne 0 ]; then
	echo "check-tracked: remove these from git (git rm --cached) and ignore them; build outputs belong in bin/" >&2
	exit 1
fi
