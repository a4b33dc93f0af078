#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the storage-backend tests.
#
#   scripts/pg_cluster.sh start DIR   prints postgres://cairn@127.0.0.1:PORT/cairn_test
#   scripts/pg_cluster.sh stop DIR
#
# DIR holds everything: the data directory, the server log and the unix
# socket, so removing DIR after `stop` leaves nothing behind.
set -euo pipefail

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
command=$1
# Nothing to stop when DIR is already gone.
if [ "$command" = stop ] && [ ! -d "$2" ]; then exit 0; fi
dir=$(cd "$2" && pwd)
data="$dir/data"
log="$dir/postgres.log"

# Debian keeps the server binaries out of PATH, under a versioned directory.
find_bindir() {
    local candidate
    if command -v pg_config >/dev/null 2>&1; then
        candidate=$(pg_config --bindir 2>/dev/null || true)
        if [ -x "$candidate/initdb" ]; then
            echo "$candidate"
            return
        fi
    fi
    candidate=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    if [ -x "$candidate/initdb" ]; then
        echo "$candidate"
        return
    fi
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return
    fi
    echo "pg_cluster: no PostgreSQL server binaries (initdb) found" >&2
    exit 1
}
bin=$(find_bindir)

# initdb and postgres refuse to run as root.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Binding port 0 lets the kernel pick; without python3, take the first port
# nothing answers on. Either way another process may take it before postgres
# does, which is why `start` retries.
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
        return
    fi
    local port
    for ((port = 20000 + RANDOM % 20000; port < 65000; port++)); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    echo "pg_cluster: no free loopback port" >&2
    exit 1
}

start() {
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
        if ! runuser -u postgres -- test -w "$dir"; then
            echo "pg_cluster: user postgres cannot reach $dir (pick a DIR under /tmp)" >&2
            exit 1
        fi
    fi
    # The bootstrap superuser is named cairn, so no separate role is needed.
    if ! as_pg "$bin/initdb" -D "$data" -U cairn --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        exit 1
    fi
    # Durability is pointless for a cluster deleted after the run.
    cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
    local attempt port
    for attempt in 1 2 3; do
        port=$(free_port)
        if as_pg "$bin/pg_ctl" -D "$data" -l "$log" -o "-p $port" -w -t 60 start >/dev/null 2>&1; then
            "$bin/createdb" -h 127.0.0.1 -p "$port" -U cairn cairn_test
            echo "postgres://cairn@127.0.0.1:$port/cairn_test"
            return
        fi
        echo "pg_cluster: start on port $port failed (attempt $attempt)" >&2
    done
    tail -n 20 "$log" >&2
    exit 1
}

stop() {
    # pg_ctl status exits non-zero when no server runs (or DIR holds no cluster).
    if [ -d "$data" ] && as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        as_pg "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    fi
}

case "$command" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
