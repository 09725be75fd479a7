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
