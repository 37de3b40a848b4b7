#!/usr/bin/env bash
# runtime-packages.sh BINARY — the Debian/Ubuntu packages that hold the shared
# libraries BINARY loads, one a line: what the images' runtime stage installs
# (the build stage runs this on the sieve it built, on the same distribution
# as the runtime stage, so the list follows the build and cannot drift).
# libc6 and libgcc-s1 are left out: every base image has them. A library no
# package owns (a toolkit installed by hand) is named on stderr and skipped.
set -euo pipefail
bin=${1:?usage: runtime-packages.sh BINARY}
ldd "$bin" >/dev/null   # fails loudly on a binary it cannot read
if ldd "$bin" | grep -q 'not found'; then
  echo "runtime-packages: $bin needs libraries that are not found:" >&2
  ldd "$bin" | grep 'not found' >&2
  exit 1
fi
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  pkg=""
  # usrmerge: ldd may say /lib/... where dpkg registered /usr/lib/..., and a
  # soname link may be registered only under its target's path.
  for path in "$lib" "/usr$lib" "$(realpath "$lib")"; do
    pkg=$(dpkg-query -S "$path" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package owns $lib" >&2
    continue
  fi
  echo "$pkg"
done | grep -v -x -E 'libc6|libgcc-s1' | sort -u
