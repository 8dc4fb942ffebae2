#!/usr/bin/env bash
# Install what the project needs: Debian build deps, a virtualenv with the
# project's Python dependencies. Idempotent; used by the Makefile and CI.
#
#   bash scripts/bootstrap.sh run   # the site's dependencies (make run; enough for production too)
#   bash scripts/bootstrap.sh dev   # and the dev and bench extras (make test, make bench)
#
# Only the dependencies listed in pyproject.toml are installed: the project
# itself has no packages to install (manage.py runs from this directory), so
# there is no build step. The virtualenv is made without pip of its own (no
# ensurepip run); the installer is uv, else pip (below).
set -eu
cd "$(dirname "$0")/.."
EXTRAS=${1:-dev}
case "$EXTRAS" in
  run) groups="" ;;
  dev) groups="dev bench" ;;
  *) echo "bootstrap: unknown set '$EXTRAS' (run or dev)" >&2; exit 2 ;;
esac

need_apt=()
dpkg -s libmariadb-dev >/dev/null 2>&1 || need_apt+=(libmariadb-dev)
dpkg -s pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ "$EXTRAS" != "run" ]; then
  dpkg -s chromium >/dev/null 2>&1 || need_apt+=(chromium)
  # The HTTP load generator of make bench (bench/http_load.py).
  dpkg -s wrk >/dev/null 2>&1 || need_apt+=(wrk)
  # promtool (checks and tests deploy/prometheus's alert rules: tests/test_alert_rules.py).
  dpkg -s prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
fi
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  echo "bootstrap: apt-get install ${need_apt[*]}"
  # Another apt may hold the lock (unattended upgrades): wait for it instead of failing.
  apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need_apt[@]}" >/dev/null
fi

stamp=.venv/.installed-$EXTRAS-$(sha256sum pyproject.toml | cut -c1-16)
if [ -f "$stamp" ] && [ -x .venv/bin/python ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv --without-pip .venv
fi

requirements=.venv/requirements-$EXTRAS.txt
# shellcheck disable=SC2086 # $groups is a list of extras
.venv/bin/python - $groups >"$requirements" <<'PY'
import sys
import tomllib

with open("pyproject.toml", "rb") as handle:
    project = tomllib.load(handle)["project"]
wanted = list(project["dependencies"])
for group in sys.argv[1:]:
    wanted += project["optional-dependencies"][group]
print("\n".join(wanted))
PY

# pip (through the system's pip, which drives the virtualenv: pip --python, pip 22.3 and
# later; else pip bootstrapped into it), and uv (a faster installer, from PyPI) when it is
# on PATH or pip can fetch it into the virtualenv; pip is the fallback of every uv failure.
pip_drives_venv=no
if python3 -m pip --python .venv/bin/python --version >/dev/null 2>&1; then
  pip_drives_venv=yes
fi
install_with_pip() {
  if [ "$pip_drives_venv" = yes ]; then
    python3 -m pip --python .venv/bin/python install --quiet "$@"
  else
    .venv/bin/python -m ensurepip --upgrade >/dev/null
    .venv/bin/python -m pip install --quiet "$@"
  fi
}
install_with_uv() {
  # uv reads no pip configuration: an index given to pip in the environment is handed over.
  if [ -n "${PIP_INDEX_URL:-}" ] && [ -z "${UV_DEFAULT_INDEX:-}${UV_INDEX_URL:-}" ]; then
    export UV_DEFAULT_INDEX=$PIP_INDEX_URL
  fi
  # Compiled now: where PYTHONDONTWRITEBYTECODE is set, nothing is ever cached on import.
  "$1" pip install --quiet --python .venv/bin/python --compile-bytecode -r "$requirements"
}
uv=$(command -v uv 2>/dev/null || true)
if [ -z "$uv" ] && [ ! -x .venv/bin/uv ] && [ "$pip_drives_venv" = yes ]; then
  echo "bootstrap: fetching uv..."
  install_with_pip --no-compile --only-binary :all: uv >/dev/null 2>&1 || true
fi
if [ -z "$uv" ] && [ -x .venv/bin/uv ]; then
  uv=.venv/bin/uv
fi

echo "bootstrap: installing $(wc -l <"$requirements") requirements ($EXTRAS) into .venv${uv:+ with uv}..."
started=$(date +%s)
if [ -z "$uv" ] || ! install_with_uv "$uv"; then
  [ -z "$uv" ] || echo "bootstrap: uv failed; installing with pip"
  install_with_pip -r "$requirements"
fi
echo "bootstrap: installed in $(($(date +%s) - started)) s"
touch "$stamp"
