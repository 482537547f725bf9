#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests (the validator's stores on PostgreSQL):
#
#   scripts/postgres.sh start [DIR]   initdb in DIR (a new temp dir when left out), start the
#                                     server on a free port of 127.0.0.1, print its URL
#                                     (postgres://pog@127.0.0.1:PORT/postgres) on stdout
#   scripts/postgres.sh stop DIR      stop it and remove DIR
#   scripts/postgres.sh pause DIR     stop the server, keeping DIR (a test of a database away)
#   scripts/postgres.sh resume DIR    start it again on the same port
#   scripts/postgres.sh unlimit DIR   lift the file-size limit its server started under
#   scripts/postgres.sh sql DIR       run the SQL on stdin against it (psql, stops at an error)
#
# A full disk without root: with POG_POSTGRES_FILE_LIMIT_KB=N, `start` runs the server under a
# soft file-size limit of N KiB (`ulimit -S -f`): the postmaster ignores SIGXFSZ, so a write
# past N KiB into any one file fails with EFBIG ("could not extend file …: File too large",
# hint "Check free disk space"), as a write to a full disk fails. POG_POSTGRES_WAL_SEGSIZE_MB
# gives initdb the WAL's segment size (1 lets the write-ahead log live under a 1024-KiB
# limit); `unlimit` raises the limit of the running server's processes (prlimit), as freeing
# space would.
#
# TLS: with POG_POSTGRES_TLS=1, `start` makes a CA and a server certificate for the name
# `localhost` only (DNS:localhost, no IP address: a client checking the name must connect to
# `localhost`), with openssl, in DIR/tls (ca.crt is the CA to give as sslrootcert), turns
# ssl on, and takes TCP connections over TLS only (hostssl; hostnossl rejected). `sql` then
# connects with sslmode=require.
#
# Client certificates: with POG_POSTGRES_CLIENT_CERT=1 (TLS as above, implied), the server checks clients'
# certificates against that CA (ssl_ca_file) and takes TCP connections only from a client
# presenting one it signed for the user it logs in as (`hostssl … cert`, which is
# clientcert=verify-full: the certificate's CN is the user name). `start` also makes such a
# certificate for the user `pog`, DIR/tls/client.crt and DIR/tls/client.key (mode 0600, owned
# by whoever ran the script), to give as sslcert and sslkey; `sql` presents it.
#
# The server programs (initdb, pg_ctl, postgres) come from /usr/lib/postgresql/*/bin or PATH;
# where they are missing, Debian's `postgresql` is installed with apt-get. They refuse to run
# as root: as root, the cluster belongs to an unprivileged user (`postgres` where it exists,
# else `pogtest`, made with useradd; POG_POSTGRES_RUN_AS names another), and every server
# program runs as that user.
# The cluster trusts local connections and runs without fsync: it is for tests only.
set -euo pipefail

say() { echo "postgres.sh: $*" >&2; }

bin_dir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$d/initdb" ] && { echo "$d"; return 0; }
    done
    command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
    return 1
}

install_postgres() {
    say "no initdb found: installing Debian's postgresql with apt-get"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# The user the server programs run as, and how to run a command as them.
run_user() {
    if [ "$(id -u)" -ne 0 ]; then
        id -un
        return
    fi
    if [ -n "${POG_POSTGRES_RUN_AS:-}" ]; then
        id "$POG_POSTGRES_RUN_AS" >/dev/null 2>&1 || useradd --system --no-create-home \
            --shell /usr/sbin/nologin "$POG_POSTGRES_RUN_AS" >&2
        echo "$POG_POSTGRES_RUN_AS"
        return
    fi
    if id postgres >/dev/null 2>&1; then
        echo postgres
        return
    fi
    if ! id pogtest >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin pogtest >&2 \
            || useradd -r -M -s /bin/false pogtest >&2
    fi
    echo pogtest
}

as_user() {
    local user=$1
    shift
    if [ "$(id -u)" -ne 0 ]; then
        "$@"
    elif command -v runuser >/dev/null 2>&1; then
        runuser -u "$user" -- "$@"
    elif command -v setpriv >/dev/null 2>&1; then
        setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@"
    else
        su -s /bin/sh "$user" -c "$(printf '%q ' "$@")"
    fi
}

# Signs a key and certificate NAME.key, NAME.crt in TLS with its CA, for the subject SUBJECT
# and the extensions EXT (P-256, valid two days).
sign() {
    local tls=$1 name=$2 subject=$3 ext=$4
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "$subject" -keyout "$tls/$name.key" -out "$tls/$name.csr" 2>/dev/null
    printf '%b' "$ext" >"$tls/$name.ext"
    openssl x509 -req -in "$tls/$name.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
        -days 2 -extfile "$tls/$name.ext" -out "$tls/$name.crt" 2>/dev/null
    chmod 0600 "$tls/$name.key"
}

# Makes DIR/tls: a throwaway CA (ca.crt, ca.key) and the server's key and certificate, signed
# by it for DNS:localhost (P-256 keys, valid two days), readable by the server's user only;
# with POG_POSTGRES_CLIENT_CERT, a client certificate for the user pog too, its key readable
# by whoever ran the script only.
make_tls() {
    local dir=$1 user=$2 tls=$1/tls
    command -v openssl >/dev/null 2>&1 || { say "POG_POSTGRES_TLS needs openssl"; exit 1; }
    mkdir -p "$tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=pog test CA" -keyout "$tls/ca.key" -out "$tls/ca.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    sign "$tls" server /CN=localhost \
        'subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n'
    chmod 0600 "$tls/ca.key"
    [ "$(id -u)" -ne 0 ] || chown -R "$user" "$tls"
    # TCP over TLS only: a client in the clear is turned away; with client certificates, a
    # client without one the CA signed for its user too.
    local method=trust
    if [ -n "${POG_POSTGRES_CLIENT_CERT:-}" ]; then
        method=cert
        sign "$tls" client /CN=pog \
            'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
        chown "$(id -u):$(id -g)" "$tls/client.key" "$tls/client.crt"
    fi
    printf 'local all all trust\nhostssl all all 127.0.0.1/32 %s\nhostnossl all all 0.0.0.0/0 reject\n' "$method" \
        >"$dir/data/pg_hba.conf"
}

# The server's options for the cluster in DIR on PORT (TLS where DIR/tls was made; clients'
# certificates checked against its CA where a client certificate was made).
server_options() {
    local dir=$1 port=$2 tls=
    [ ! -d "$dir/tls" ] || tls=" -c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key"
    [ ! -f "$dir/tls/client.crt" ] || tls="$tls -c ssl_ca_file=$dir/tls/ca.crt"
    echo "-p $port -k $dir/socket -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200$tls"
}

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local bin dir user port tries
    bin=$(bin_dir) || { install_postgres; bin=$(bin_dir) || { say "initdb is still missing after installing postgresql"; exit 1; }; }
    dir=${1:-$(mktemp -d /tmp/pog-postgres.XXXXXX)}
    mkdir -p "$dir"
    user=$(run_user)
    # The user must reach the directory: a temp dir is 0700 and root's.
    chmod 0755 "$dir"
    mkdir -p "$dir/data" "$dir/socket"
    [ "$(id -u)" -ne 0 ] || chown -R "$user" "$dir/data" "$dir/socket"
    local wal=()
    [ -z "${POG_POSTGRES_WAL_SEGSIZE_MB:-}" ] || wal=(--wal-segsize="$POG_POSTGRES_WAL_SEGSIZE_MB")
    as_user "$user" "$bin/initdb" -D "$dir/data" -U pog --auth=trust --encoding=UTF8 \
        --no-locale "${wal[@]}" >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; say "initdb failed"; exit 1; }
    [ -z "${POG_POSTGRES_TLS:-}${POG_POSTGRES_CLIENT_CERT:-}" ] || make_tls "$dir" "$user"
    # The limit is set in the user's own shell: runuser's session resets resource limits.
    local limited=()
    [ -z "${POG_POSTGRES_FILE_LIMIT_KB:-}" ] \
        || limited=(bash -c 'ulimit -S -f "$1" && shift && exec "$@"' limit "$POG_POSTGRES_FILE_LIMIT_KB")
    for tries in $(seq 1 20); do
        port=$((20000 + RANDOM % 20000))
        port_free "$port" || continue
        if as_user "$user" "${limited[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 30 \
            -o "$(server_options "$dir" "$port")" start >&2; then
            echo "$port" >"$dir/port"
            echo "$user" >"$dir/user"
            echo "postgres://pog@127.0.0.1:$port/postgres"
            return 0
        fi
        grep -q "could not bind\|Address already in use" "$dir/data/server.log" 2>/dev/null || break
    done
    cat "$dir/data/server.log" >&2 2>/dev/null || true
    say "the server did not start (see above)"
    exit 1
}

stop() {
    local dir=${1:?"usage: $0 stop DIR"} bin user
    if [ -f "$dir/data/postmaster.pid" ] && bin=$(bin_dir); then
        user=$(cat "$dir/user" 2>/dev/null || run_user)
        as_user "$user" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
    fi
    rm -rf "$dir"
}

pause() {
    local dir=${1:?"usage: $0 pause DIR"} bin user
    bin=$(bin_dir)
    user=$(cat "$dir/user")
    as_user "$user" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
}

resume() {
    local dir=${1:?"usage: $0 resume DIR"} bin user port
    bin=$(bin_dir)
    user=$(cat "$dir/user")
    port=$(cat "$dir/port")
    as_user "$user" "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 30 \
        -o "$(server_options "$dir" "$port")" start >&2
}

unlimit() {
    local dir=${1:?"usage: $0 unlimit DIR"} user pid p
    user=$(cat "$dir/user")
    pid=$(head -n 1 "$dir/data/postmaster.pid")
    # The postmaster (new backends fork from it), then the processes it runs now (one that
    # ends meanwhile is no matter).
    as_user "$user" prlimit --pid "$pid" --fsize=unlimited:unlimited
    for p in /proc/[0-9]*; do
        [ "$(awk '/^PPid:/ {print $2}' "$p/status" 2>/dev/null)" = "$pid" ] || continue
        as_user "$user" prlimit --pid "${p#/proc/}" --fsize=unlimited:unlimited 2>/dev/null || true
    done
}

sql() {
    local dir=${1:?"usage: $0 sql DIR"} bin
    bin=$(bin_dir)
    local mode=disable
    [ ! -d "$dir/tls" ] || mode=require
    [ ! -f "$dir/tls/client.crt" ] || export PGSSLCERT=$dir/tls/client.crt PGSSLKEY=$dir/tls/client.key
    PGSSLMODE=$mode "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cat "$dir/port")" -U pog postgres
}

case "${1:-}" in
    start) start "${2:-}" ;;
    stop) stop "${2:-}" ;;
    pause) pause "${2:-}" ;;
    resume) resume "${2:-}" ;;
    unlimit) unlimit "${2:-}" ;;
    sql) sql "${2:-}" ;;
    *) echo "usage: $0 start [DIR] | stop DIR | pause DIR | resume DIR | unlimit DIR | sql DIR" >&2; exit 2 ;;
esac
