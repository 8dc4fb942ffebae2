#!/usr/bin/env bash
# Install what the project needs: Debian build deps, a virtualenv with the
# project's Python dependencies. Idempotent; used by the Makefile and CI.
set -eu
cd "$(dirname "$0")/.."
EXTRAS=${1:-dev}

need_apt=()
dpkg -s libmariadb-dev >/dev/null 2>&1 || need_apt+=(libmariadb-dev)
dpkg -s pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ "$EXTRAS" != "run" ]; then
  dpkg -s chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  echo "bootstrap: apt-get install ${need_apt[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed-$EXTRAS-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  if [ "$EXTRAS" = "run" ]; then
    .venv/bin/pip install -q -e .
  else
    .venv/bin/pip install -q -e ".[dev,bench]"
  fi
  touch "$stamp"
fi
