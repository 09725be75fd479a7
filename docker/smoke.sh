#!/usr/bin/env bash
# Builds the real runtime image from ./Dockerfile without a Docker engine or a registry, then
# checks that the daemon starts inside it as the non-root user and that the health probe passes.
#
#   sudo docker/smoke.sh            (root: debootstrap, podman and buildah need it)
#
# Not part of `cargo test` (it takes minutes). Steps:
#   1. a Debian bookworm base made with debootstrap (trimmed like debian:bookworm-slim) and
#      `podman import`ed as localhost/deadbolt-base:bookworm (cached: built once per machine);
#   2. the release binary built on the host with `cargo build --release --locked` (same Debian
#      release, so the same glibc) and handed to the Dockerfile's "prebuilt" stage;
#   3. `podman build` of the Dockerfile with BASE_IMAGE=the local base, BIN_STAGE=prebuilt;
#   4. `buildah run --isolation chroot` in a container of that image: id, deadbolt --ping
#      (must fail: nothing listens yet), start the daemon as the image's user, wait for
#      --ping (a real PING/PONG) to pass, check the uid and cwd, SIGTERM and a clean exit.
# Prints the image size at the end. Environment: DEBIAN_MIRROR, KEEP=1 (keep the container).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
IMAGE=${IMAGE:-localhost/deadbolt:smoke}
BASE=localhost/deadbolt-base:bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=${WORK:-/var/tmp/deadbolt-smoke}
mkdir -p "$WORK"

say() { printf '\n=== %s\n' "$*"; }
fail() { printf '\nSMOKE FAILED: %s\n' "$*" >&2; exit 1; }

for tool in debootstrap podman buildah; do
    if ! command -v "$tool" >/dev/null; then
        say "installing $tool"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap podman buildah
        break
    fi
done

if ! podman image exists "$BASE"; then
    say "making $BASE with debootstrap"
    rm -rf "$WORK/rootfs"
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR"
    # What debian:bookworm-slim leaves out: apt lists and caches, docs, man pages, locales.
    rm -rf "$WORK/rootfs"/var/lib/apt/lists/* "$WORK/rootfs"/var/cache/apt/* \
        "$WORK/rootfs"/usr/share/doc/* "$WORK/rootfs"/usr/share/man/* \
        "$WORK/rootfs"/usr/share/info/* "$WORK/rootfs"/usr/share/locale/* \
        "$WORK/rootfs"/var/log/*.log
    tar -C "$WORK/rootfs" -c . | podman import - "$BASE"
    rm -rf "$WORK/rootfs"
fi

say "cargo build --release --locked (host)"
cargo build --release --locked
rm -rf docker/prebuilt
mkdir -p docker/prebuilt
cp target/release/deadbolt docker/prebuilt/deadbolt
strip docker/prebuilt/deadbolt
trap 'rm -rf "$ROOT/docker/prebuilt"' EXIT

say "podman build $IMAGE"
podman build --isolation chroot --format docker \
    --build-arg BASE_IMAGE="$BASE" --build-arg BIN_STAGE=prebuilt \
    -t "$IMAGE" -f Dockerfile .

say "image metadata"
podman image inspect "$IMAGE" --format 'User={{.Config.User}} WorkingDir={{.Config.WorkingDir}} Volumes={{.Config.Volumes}} ExposedPorts={{.Config.ExposedPorts}} Entrypoint={{.Config.Entrypoint}} Cmd={{.Config.Cmd}}'
meta=$(podman image inspect "$IMAGE" --format '{{.Config.User}}|{{.Config.WorkingDir}}|{{.Config.Volumes}}|{{.Config.ExposedPorts}}')
[[ $meta == deadbolt:deadbolt\|/data\|*"/data"*\|*"6379/tcp"* ]] || fail "unexpected image config: $meta"
health=$(podman image inspect "$IMAGE" --format '{{.HealthCheck.Test}}' 2>/dev/null || true)
echo "HealthCheck=$health"
[[ $health == *"--ping"* ]] || fail "no HEALTHCHECK with --ping"

ctr=$(buildah from "$IMAGE")
cleanup() {
    if [[ ${KEEP:-0} != 1 ]]; then buildah rm "$ctr" >/dev/null 2>&1 || true; fi
    rm -rf "$ROOT/docker/prebuilt"
}
trap cleanup EXIT
run() { buildah run --isolation chroot --user deadbolt:deadbolt "$ctr" -- "$@"; }

say "inside the image"
run id
[[ $(run id -u) != 0 ]] || fail "runs as root"
run deadbolt --version
run deadbolt /etc/deadbolt/deadbolt.conf --test-config
# The shipped config, as the container sees it: every interface, /data, protected mode off.
run sh -c "grep -E '^(bind|protected-mode|dir) ' /etc/deadbolt/deadbolt.conf | tail -3"
if run deadbolt /etc/deadbolt/deadbolt.conf --ping 2>/dev/null; then
    fail "--ping passed with no server running"
fi

# One shell inside the container: start the daemon the way the entrypoint does (as the image's
# user, in /data), wait for the health probe, talk RESP, check who runs it, shut down.
say "daemon + health probe inside the image"
# A port of its own, in case something on the host (chroot isolation shares the network) has 6379.
PORT=${PORT:-16379}
run sh -ec '
    cd /data
    start=$(date +%s%N)
    docker-entrypoint.sh --port '"$PORT"' --logfile /data/deadbolt.log &
    pid=$!
    i=0
    until deadbolt /etc/deadbolt/deadbolt.conf --port '"$PORT"' --ping; do
        i=$((i+1)); [ $i -lt 500 ] || { echo "never became healthy"; cat /data/deadbolt.log; exit 1; }
        sleep 0.01
    done
    ready=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "healthy after ${ready} ms"
    echo "process: uid=$(awk "/^Uid:/{print \$2}" /proc/$pid/status) user=$(id -un) cwd=$(readlink /proc/$pid/cwd)"
    [ "$(awk "/^Uid:/{print \$2}" /proc/$pid/status)" != 0 ] || { echo "daemon runs as root"; exit 1; }
    grep -q "Ready to accept connections" /data/deadbolt.log
    grep "Listening on" /data/deadbolt.log
    kill -TERM $pid
    wait $pid
    grep -q "ready to exit, bye bye" /data/deadbolt.log
    echo "clean shutdown on SIGTERM"
    # A password given as an argument: the image health check (no password) still passes.
    docker-entrypoint.sh --port '"$PORT"' --requirepass s3cret --logfile /data/pw.log &
    pid=$!
    i=0
    until deadbolt /etc/deadbolt/deadbolt.conf --port '"$PORT"' --ping; do
        i=$((i+1)); [ $i -lt 500 ] || { echo "never became healthy with a password"; exit 1; }
        sleep 0.01
    done
    echo "healthy with --requirepass given as an argument"
    kill -TERM $pid
    wait $pid
'

size=$(podman image inspect "$IMAGE" --format '{{.Size}}')
base_size=$(podman image inspect "$BASE" --format '{{.Size}}')
say "image size"
printf '%s: %s bytes (%.1f MB); base %s: %.1f MB; deadbolt binary: %s bytes\n' \
    "$IMAGE" "$size" "$(echo "$size / 1000000" | bc -l)" "$BASE" "$(echo "$base_size / 1000000" | bc -l)" \
    "$(stat -c %s docker/prebuilt/deadbolt)"
echo "SMOKE OK"
