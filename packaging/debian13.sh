#!/bin/sh
# Run the test suite inside a Debian 13 (trixie) root on this Debian 12 machine.
#
# Usage: sh packaging/debian13.sh [COMMAND [ARG...]]
#
#   COMMAND runs in the checkout inside the root (default: `make test`), e.g.
#   `sh packaging/debian13.sh tox -e py -- tests/unit -q`. `make test-debian13`
#   runs this script with no arguments. As root.
#
# What it does:
#   1. The root: a cached `mmdebstrap --variant=apt` trixie root from the mirror
#      of /etc/apt/sources.list.d/debian.sources, under $CACHE (root-owned, 0700).
#      It is rebuilt when its marker (written only after a complete build) is
#      missing or older than 7 days, or when a quick sanity check fails.
#   2. Each run works on a fresh copy of that root (`cp -a`), so nothing a run
#      installs or leaves behind reaches the next one; downloaded .debs and pip
#      wheels are kept in $CACHE between runs (cleared with the root).
#   3. The copy gets the host's CA certificates, /etc/pip.conf (if any), its
#      resolv.conf (apt and pip download inside) and apt's Check-Valid-Until /
#      Check-Date policy (the mirror may be a snapshot with expired Release files).
#   4. The checkout: a `git clone` of this repository's committed HEAD, as CI
#      tests a clean clone: uncommitted changes are not tested.
#   5. Entered with pivot_root in a private mount namespace (a plain chroot is not
#      enough: nsenter into a sandbox node resets the root to the host's). All its
#      mounts vanish with the namespace.
#   6. Runs packaging/install-deps.sh, then COMMAND with CI=true; prints the wall
#      time of each phase. Processes left running in the root are ended (by PID)
#      and the copy is removed, unless PCMKIMG_DEBIAN13_KEEP=1.
#
# Environment: PCMKIMG_DEBIAN13_CACHE (default /var/cache/pcmkimg/debian13),
# PCMKIMG_DEBIAN13_KEEP=1 keeps the run's copy for inspection.
set -eu

SUITE=trixie
CACHE=${PCMKIMG_DEBIAN13_CACHE:-/var/cache/pcmkimg/debian13}
BASE=$CACHE/root
MARKER=$CACHE/complete
MAX_AGE_DAYS=7
# What the suite needs to bootstrap itself; install-deps.sh installs the rest.
INCLUDE=ca-certificates,python3,make,git,iproute2,procps,mount,util-linux
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
SRC=$(cd "$(dirname "$0")/.." && pwd)

say() { echo "debian13: $*" >&2; }
die() {
    say "$*"
    exit 1
}
now() { date +%s; }

[ "$(id -u)" = 0 ] || die "run as root (it builds a root with mmdebstrap and enters it with pivot_root)"

# The first non-security URI of the host's Debian sources (deb822, then one-line format).
host_mirror() {
    f=/etc/apt/sources.list.d/debian.sources
    if [ -r "$f" ]; then
        awk '
            /^[[:space:]]*$/ { if (uri != "" && !sec) { print uri; exit } uri = ""; sec = 0; next }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { if ($0 ~ /-security/) sec = 1 }
            END { if (uri != "" && !sec) print uri }
        ' "$f" | head -n 1
        return
    fi
    if [ -r /etc/apt/sources.list ]; then
        awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
            /etc/apt/sources.list
    fi
}

# The host's apt policy for old Release files, as apt.conf lines (empty if unset).
host_apt_policy() {
    for opt in Acquire::Check-Valid-Until Acquire::Check-Date; do
        v=$(apt-config dump "$opt" 2>/dev/null | awk -v o="$opt" '$1 == o { gsub(/[";]/, "", $2); print $2 }')
        [ -n "$v" ] && printf '%s "%s";\n' "$opt" "$v"
    done
    return 0
}

root_ok() {
    [ -f "$MARKER" ] || return 1
    [ -z "$(find "$MARKER" -mtime +$((MAX_AGE_DAYS - 1)) 2>/dev/null)" ] || {
        say "the cached root is older than $MAX_AGE_DAYS days"
        return 1
    }
    if grep -q "^VERSION_CODENAME=$SUITE\$" "$BASE/etc/os-release" 2>/dev/null &&
        chroot "$BASE" /usr/bin/python3 -c 'import ssl, venv' 2>/dev/null &&
        chroot "$BASE" dpkg-query -W apt make git iproute2 procps mount >/dev/null 2>&1 &&
        chroot "$BASE" apt-get -q check >/dev/null 2>&1; then
        return 0
    fi
    say "the cached root fails its sanity check (os-release, python3, packages, apt-get check)"
    return 1
}

build_root() {
    if ! command -v mmdebstrap >/dev/null; then
        say "installing mmdebstrap"
        apt-get -o DPkg::Lock::Timeout=600 update -q
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
            --no-install-recommends mmdebstrap
    fi
    mirror=$(host_mirror)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    say "building a $SUITE root from $mirror"
    rm -f "$MARKER"
    rm -rf "$BASE" "$BASE.new" "$CACHE/apt-archives" "$CACHE/pip"
    set --
    policy=$(host_apt_policy)
    if [ -n "$policy" ]; then
        # One line each, e.g. Acquire::Check-Valid-Until "false";
        old_ifs=$IFS
        IFS='
'
        for line in $policy; do set -- "$@" --aptopt="$line"; done
        IFS=$old_ifs
    fi
    mmdebstrap --quiet --mode=root --variant=apt --include="$INCLUDE" "$@" \
        "$SUITE" "$BASE.new" "deb [signed-by=$KEYRING] $mirror $SUITE main"
    mv "$BASE.new" "$BASE"
    date -u +%Y-%m-%dT%H:%M:%SZ >"$MARKER"
}

mkdir -p -m 0700 "$CACHE"
chmod 0700 "$CACHE"
exec 9>"$CACHE/lock"
flock 9

t0=$(now)
if root_ok; then
    say "cached $SUITE root from $(cat "$MARKER")"
else
    build_root
    root_ok || die "the fresh root fails its sanity check: see $BASE"
fi
t_root=$(($(now) - t0))

RUN=$(mktemp -d "$CACHE/run.XXXXXX")
ROOT=$RUN/root
cleanup() {
    rc=$?
    # Processes still running in the root (a sandbox daemon after an interrupted
    # run): started by this run, ended by PID. Their root is ROOT (same inode).
    id=$(stat -c %d:%i "$ROOT" 2>/dev/null || true)
    if [ -n "$id" ]; then
        left=""
        for d in /proc/[0-9]*; do
            [ "$(stat -L -c %d:%i "$d/root" 2>/dev/null)" = "$id" ] && left="$left ${d#/proc/}"
        done
        if [ -n "$left" ]; then
            say "ending processes left in the root:$left"
            # shellcheck disable=SC2086
            kill $left 2>/dev/null || true
            sleep 2
            # shellcheck disable=SC2086
            kill -9 $left 2>/dev/null || true
        fi
    fi
    if [ "${PCMKIMG_DEBIAN13_KEEP:-}" = 1 ]; then
        say "kept $RUN"
    else
        rm -rf "$RUN"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(now)
cp -a "$BASE" "$ROOT"
flock -u 9
mkdir -p "$CACHE/apt-archives/partial" "$CACHE/pip" "$ROOT/root/.cache/pip" "$ROOT/var/cache/apt/archives" "$ROOT/.oldroot" "$ROOT/src"

# Trust what the host trusts; download the way the host does.
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
if [ -d /usr/local/share/ca-certificates ]; then
    cp -a /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOT/etc/pip.conf"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
[ -s "$ROOT/etc/hosts" ] || printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
policy=$(host_apt_policy)
[ -n "$policy" ] && printf '%s\n' "$policy" >"$ROOT/etc/apt/apt.conf.d/99pcmkimg-host"

# The committed HEAD, as CI's clean clone.
# A checkout owned by another user (a CI runner's) is still ours to read.
git() { command git -c safe.directory="$SRC" "$@"; }
rev=$(git -C "$SRC" rev-parse HEAD)
git clone --quiet --no-hardlinks "$SRC" "$ROOT/src/pcmkimg"
git -C "$ROOT/src/pcmkimg" checkout --quiet --detach "$rev"
t_copy=$(($(now) - t0))
say "testing $(git -C "$SRC" log -1 --format='%h %s' "$rev" | cut -c1-72)"
dirty=$(git -C "$SRC" status --porcelain --untracked-files=no | wc -l)
[ "$dirty" = 0 ] || say "note: $dirty modified tracked file(s) in $SRC are not tested (committed HEAD only)"

[ $# -gt 0 ] || set -- make test

# Inside a private mount namespace: the root bound onto itself (pivot_root needs a
# mount point), proc, sys and dev as the host has them, fresh /run and /dev/shm,
# the download caches, then pivot_root and drop the old root.
status=0
unshare -m --propagation private /bin/sh -eu -c '
    R=$1 CACHE=$2
    shift 2
    mount --bind "$R" "$R"
    mount -t proc proc "$R/proc"
    mount --rbind /sys "$R/sys"
    mount --rbind /dev "$R/dev"
    mount -t tmpfs -o mode=0755 tmpfs "$R/run"
    mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
    mount --bind "$CACHE/apt-archives" "$R/var/cache/apt/archives"
    mount --bind "$CACHE/pip" "$R/root/.cache/pip"
    cd "$R"
    pivot_root . .oldroot
    cd /
    umount -l /.oldroot
    exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root USER=root LANG=C.UTF-8 TERM=dumb CI=true \
        /bin/sh -eu -c "
            cd /src/pcmkimg
            . /etc/os-release
            echo \"debian13: inside \$PRETTY_NAME, python \$(python3 -c \"import platform; print(platform.python_version())\")\" >&2
            t0=\$(date +%s)
            sh packaging/install-deps.sh
            echo \"debian13: phase packages: \$((\$(date +%s) - t0)) s\" >&2
            t0=\$(date +%s)
            rc=0
            \"\$@\" || rc=\$?
            echo \"debian13: phase suite (\$*): \$((\$(date +%s) - t0)) s, exit \$rc\" >&2
            exit \$rc
        " sh "$@"
' sh "$ROOT" "$CACHE" "$@" || status=$?
say "phase root: $t_root s; phase copy+clone: $t_copy s"
exit $status
