# syntax=docker/dockerfile:1
#
# deadbolt container image.
#   docker build -t deadbolt .
#   docker run -d -p 6379:6379 -v deadbolt-data:/data deadbolt
#   docker run --rm deadbolt --port 7000 --requirepass secret     (redis-server style arguments)
# See docker/README.md (compose file for three Redlock nodes, the smoke test, protected mode).

# Images are arguments so an offline build can point them at local images (docker/smoke.sh).
ARG RUST_IMAGE=rust:1-slim-bookworm
ARG BASE_IMAGE=debian:bookworm-slim
# "builder" compiles from source; docker/smoke.sh uses "prebuilt" (a binary built on the host).
ARG BIN_STAGE=builder

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
# Dependencies first, so source edits do not refetch and rebuild every crate.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && cargo fetch --locked \
    && rm -rf src
# build.rs compiles the C in src/ (long double arithmetic, the Lua pattern matcher).
COPY build.rs ./
COPY src ./src
# The lock scripts we ship are compiled into the binary (src/script/native.rs includes them).
COPY lua ./lua
# Extra cargo arguments; empty by default (the release profile: fat LTO). scripts/docker-build's
# FAST=1 passes `--config profile.release.lto=false …` for a quicker check build.
ARG CARGO_ARGS=""
RUN cargo build --release --locked $CARGO_ARGS \
    && install -D -m 0755 target/release/deadbolt /out/deadbolt \
    && strip /out/deadbolt

FROM scratch AS prebuilt
COPY docker/prebuilt/deadbolt /out/deadbolt

FROM ${BIN_STAGE} AS bin

FROM ${BASE_IMAGE}
# A fixed uid/gid so volume permissions are predictable across rebuilds.
RUN groupadd --system --gid 999 deadbolt \
    && useradd --system --uid 999 --gid deadbolt --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin deadbolt \
    && mkdir -p /data /etc/deadbolt \
    && chown deadbolt:deadbolt /data
COPY --from=bin /out/deadbolt /usr/local/bin/deadbolt
COPY docker/entrypoint.sh /usr/local/bin/docker-entrypoint.sh
COPY config/deadbolt.conf /etc/deadbolt/deadbolt.conf
# The shipped file is the safe bare-metal default (loopback only). In a container the network
# namespace is the boundary and clients arrive from the bridge, so listen on every interface and,
# like the official Redis image, turn protected mode off: set `requirepass` (or `user` lines) for
# anything reachable from outside. Appended lines win over the ones above them.
RUN printf '\n%s\n%s\n%s\n%s\n' \
        '# --- container defaults (appended by the Dockerfile; later lines win) ---' \
        'bind 0.0.0.0' 'protected-mode no' 'dir /data' >> /etc/deadbolt/deadbolt.conf \
    && deadbolt /etc/deadbolt/deadbolt.conf --test-config

USER deadbolt:deadbolt
WORKDIR /data
VOLUME /data
EXPOSE 6379
# The probe reads the same config (port, password) the server was started with.
HEALTHCHECK --interval=5s --timeout=3s --start-period=2s --retries=3 \
    CMD ["deadbolt", "/etc/deadbolt/deadbolt.conf", "--ping"]
ENTRYPOINT ["docker-entrypoint.sh"]
CMD []
