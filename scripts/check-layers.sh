#!/usr/bin/env bash
# The layer check (docs/architecture.md, "Layers"). Fails when
#  1. an #include in a library folder points up or sideways against the
#     order in scripts/layers.conf, or names a folder the order lacks;
#  2. an example includes anything but the public header;
# and, given the library's object files (--objects DIR, as CMake builds
# them under CMakeFiles/dtorch_obj.dir), also when
#  3. an object uses a symbol defined by a higher or peer layer (a call
#     through the public header is a call too);
#  4. a folder defines a global symbol without its prefix, or `dt_` outside
#     api/.
# Usage: scripts/check-layers.sh [--root DIR] [--objects DIR]
#        scripts/check-layers.sh --self-test   (plants violations in a copy
#        of the tree and checks that each one fails)
# Exit 1 on a violation.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
conf="$root/scripts/layers.conf"
objdir=
while [ $# -gt 0 ]; do
  case "$1" in
    --objects) objdir=${2:?--objects needs a folder}; shift 2 ;;
    --root) root=$(cd "${2:?--root needs a folder}" && pwd); shift 2 ;;
    --self-test)
      tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
      src=$(cd "$(dirname "$0")/.." && pwd)
      plant() { # folder/file, the line to add, what the failure must say
        rm -rf "$tmp/t"; mkdir -p "$tmp/t"
        (cd "$src" && cp -r scripts include examples "$tmp/t" && for e in $(sed 's/#.*//' scripts/layers.conf); do cp -r "${e%%:*}" "$tmp/t"; done)
        echo "$2" >> "$tmp/t/$1"
        if out=$("$0" --root "$tmp/t" 2>&1); then
          echo "self-test: planting '$2' in $1 passed the check" >&2; exit 1
        fi
        grep -q "$3" <<<"$out" || { echo "self-test: expected '$3' in:\n$out" >&2; exit 1; }
        echo "self-test: caught $1 += $2"
      }
      plant core/error.h '#include "api/api.h"' 'core/ may not include api/ (up)'
      plant ops/ops.h '#include "mesh/mesh.h"' 'ops/ may not include mesh/ (sideways)'
      plant sched/ring.c '#include "tools/tools.h"' 'tools/ is not a library layer'
      plant examples/quickstart.c '#include "core/tensor.h"' 'examples use only the public header'
      "$0" --root "$src" >/dev/null
      echo "self-test: ok (the unplanted tree passes)"
      exit 0 ;;
    *) echo "usage: $0 [--root DIR] [--objects DIR] | --self-test" >&2; exit 2 ;;
  esac
done

declare -A level prefix
n=0
while read -r line; do
  line=${line%%#*}
  [ -z "${line// }" ] && continue
  for entry in $line; do
    level[${entry%%:*}]=$n
    prefix[${entry%%:*}]=${entry#*:}
  done
  n=$((n + 1))
done < "$conf"

bad=0
fail() { echo "check-layers: $*" >&2; bad=1; }

# ---- 1. includes of the library folders
for dir in "${!level[@]}"; do
  [ -d "$root/$dir" ] || { fail "$dir/ is in layers.conf but not in the tree"; continue; }
  while IFS= read -r hit; do
    file=${hit%%:*}; rest=${hit#*:}; lineno=${rest%%:*}
    inc=$(sed -E 's/^[^"]*"([^"]+)".*/\1/' <<<"${rest#*:}")
    top=${inc%%/*}
    [ "$top" = dtorch ] && continue
    if [ "$inc" = "$top" ]; then
      fail "${file#$root/}:$lineno includes \"$inc\": name the folder (\"$dir/$inc\")"
      continue
    fi
    if [ -z "${level[$top]+x}" ]; then
      fail "${file#$root/}:$lineno includes \"$inc\": $top/ is not a library layer"
    elif [ "$top" != "$dir" ] && [ "${level[$top]}" -ge "${level[$dir]}" ]; then
      what=up; [ "${level[$top]}" -eq "${level[$dir]}" ] && what=sideways
      fail "${file#$root/}:$lineno includes \"$inc\": $dir/ may not include $top/ ($what)"
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/$dir" \
             --include='*.c' --include='*.h' --include='*.cu' || true)
done

# ---- 2. examples: the public header only
if [ -d "$root/examples" ]; then
  while IFS= read -r hit; do
    case "$hit" in *'"dtorch/dtorch.h"'*|*'<dtorch/dtorch.h>'*) continue ;; esac
    case "$hit" in *'#'*include*'<'*) continue ;; esac   # system headers
    fail "${hit#$root/}: examples use only the public header"
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include' "$root/examples" --include='*.c' || true)
fi

# ---- 3 and 4. symbols of the built objects
if [ -n "$objdir" ]; then
  [ -d "$objdir" ] || { echo "check-layers: no object folder $objdir" >&2; exit 2; }
  declare -A owner
  defs=$(mktemp); undefs=$(mktemp)
  trap 'rm -f "$defs" "$undefs"' EXIT
  for dir in "${!level[@]}"; do
    [ -d "$objdir/$dir" ] || continue
    while IFS= read -r obj; do
      src=${obj#$objdir/}; src=${src%.o}
      [ -f "$root/$src" ] || continue   # left over from a source since moved
      nm -g --defined-only "$obj" | awk -v d="$dir" -v o="${obj#$objdir/}" \
        '$2 ~ /^[TDBRCV]$/ && $3 !~ /^__/ && $3 !~ /\./ {print d, o, $3}' >> "$defs"
      # __* and names with dots are the compiler's and sanitizers' own
      nm -u "$obj" | awk -v d="$dir" -v o="${obj#$objdir/}" \
        '$2 !~ /^__/ && $2 !~ /\./ {print d, o, $2}' >> "$undefs"
    done < <(find "$objdir/$dir" -name '*.o')
  done
  [ -s "$defs" ] || { echo "check-layers: no objects under $objdir" >&2; exit 2; }
  while read -r dir obj sym; do
    owner[$sym]=$dir
    ok=0
    for p in ${prefix[$dir]//,/ }; do
      case "$sym" in "${p}"_*) ok=1 ;; esac
    done
    [ "$ok" = 1 ] || fail "$obj defines $sym: $dir/ names its globals ${prefix[$dir]//,/_* or }_*"
  done < "$defs"
  while read -r dir obj sym; do
    o=${owner[$sym]:-}
    [ -z "$o" ] || [ "$o" = "$dir" ] && continue
    if [ "${level[$o]}" -ge "${level[$dir]}" ]; then
      fail "$obj uses $sym of $o/: $dir/ may not call into $o/"
    fi
  done < "$undefs"
fi

if [ "$bad" -ne 0 ]; then
  echo "check-layers: FAILED (order: scripts/layers.conf; docs/architecture.md)" >&2
  exit 1
fi
echo "check-layers: ok (${#level[@]} folders in $n layers${objdir:+, symbols checked})"
