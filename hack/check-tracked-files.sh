#!/usr/bin/env bash
# Fails when git tracks a build output: a compiled executable (ELF, Mach-O, PE, or any file with
# the executable bit that is not a script starting with #!), or a file over 1 MiB outside test
# data (folders named testdata, and test/manifests). make verify runs it; a clone downloads every
# tracked byte, so a binary committed by mistake costs every user.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' entry; do
  mode=${entry%% *}
  path=${entry#*$'\t'}
  [[ -f $path ]] || continue # deleted in the work tree, not yet committed
  magic=$(head -c 4 "$path" | od -An -tx1 | tr -d ' \n')
  case $magic in
    7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | 4d5a*)
      echo "tracked executable: $path (a build output: remove it with git rm --cached and ignore it)"; bad=1; continue ;;
  esac
  if [[ $mode == 100755 && $(head -c 2 "$path") != '#!' ]]; then
    echo "tracked file with the executable bit that is no script: $path"; bad=1
  fi
  size=$(stat -c %s "$path")
  if (( size > limit )); then
    case $path in
      */testdata/* | testdata/* | test/manifests/*) ;;
      *) echo "tracked file over 1 MiB outside test data: $path ($size bytes)"; bad=1 ;;
    esac
  fi
done < <(git ls-files -s -z | sed -z 's/^\([0-9]*\) [0-9a-f]* [0-9]\t/\1 x\t/')
exit $bad
