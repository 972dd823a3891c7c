# stocklock in a container: one `stocklock serve` instance per container.
# docker-compose.yml runs two of them behind nginx with one Redis.
#
#   docker build -t stocklock .
#   docker run --rm -p 3000:3000 -e STOCKLOCK_REDIS_URL=redis://HOST:6379 stocklock

# Override with --build-arg RUST_VERSION=1.95 to pin a toolchain (the workspace
# needs 1.89 or newer, its rust-version; the project is developed on 1.95).
ARG RUST_VERSION=1

# ---- build ------------------------------------------------------------------
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /build

# Dependencies first, against stub sources, so editing src/ does not rebuild
# all of tokio, axum and redis. Only a cache: if it fails (a manifest that needs
# more than the stubs), the full build below still runs and reports the real
# error. The workspace's two crates (the application and the lock library,
# crates/stocklock-lock, whose examples its manifest names) get stub sources;
# their own artifacts are deleted so the real crates are always rebuilt,
# whatever the file timestamps say.
COPY Cargo.toml Cargo.lock ./
COPY crates/stocklock-lock/Cargo.toml crates/stocklock-lock/
COPY crates/stocklock-lock/examples crates/stocklock-lock/examples
RUN mkdir -p src crates/stocklock-lock/src \
    && echo 'fn main() {}' > src/main.rs \
    && : > src/lib.rs \
    && : > crates/stocklock-lock/src/lib.rs \
    && (cargo build --release --locked \
        || echo "dependency pre-build failed; the full build below will retry") \
    && rm -rf src crates/stocklock-lock/src \
        target/release/.fingerprint/stocklock-* \
        target/release/deps/stocklock-* \
        target/release/deps/libstocklock-* \
        target/release/deps/stocklock_lock-* \
        target/release/deps/libstocklock_lock-* \
        target/release/stocklock \
        target/release/libstocklock.*

# The whole tree: src/ pulls in src/**/*.lua and nginx/nginx.conf, the lock
# library its scripts, with include_str!, so they must be here at compile time.
COPY . .
RUN cargo build --release --locked \
    && install -m 0755 target/release/stocklock /usr/local/bin/stocklock

# ---- runtime ----------------------------------------------------------------
FROM debian:bookworm-slim AS runtime

# redis-server and nginx: a dashboard card's Scenarios button runs the lab
# on a stack of its own, which `stocklock up` starts inside this container.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates redis-server nginx-light \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin stocklock

COPY --from=build /usr/local/bin/stocklock /usr/local/bin/stocklock

# The CLI's default, 127.0.0.1:3000, is unreachable from outside a container.
ENV STOCKLOCK_LISTEN=0.0.0.0:3000
EXPOSE 3000

# Numeric, so `runAsNonRoot` style checks can see it is not root.
USER 10001:10001

# No curl in slim: bash's /dev/tcp asks GET /healthz on the port of
# STOCKLOCK_LISTEN (keep it in step if you pass --listen with another port).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${STOCKLOCK_LISTEN##*:} && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]

ENTRYPOINT ["stocklock"]
CMD ["serve"]
