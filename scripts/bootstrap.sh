#!/usr/bin/env bash
# Installs the build dependencies of dtorch with apt-get, only those missing.
# Idempotent and quiet when everything is already there.
set -euo pipefail

pkgs=(build-essential cmake pkg-config liburing-dev libck-dev libcmocka-dev
      libopenblas-dev libcjson-dev libmicrohttpd-dev clang
      libopenmpi-dev openmpi-bin)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done"
