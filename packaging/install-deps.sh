#!/bin/sh
# Install the system packages that the test suite and the sandbox need.
# Idempotent: packages already present are not touched. Debian/Ubuntu, as root.
set -eu

# skopeo: pcmkimg outdated asks the registries with it; systemd: systemd-analyze verify of the
# shipped units (tests/unit/test_outdated.py).
PKGS="podman runc busybox-static docker-registry skopeo uidmap
pacemaker pacemaker-cli-utils corosync pcs resource-agents
rpm libxml2-utils openssh-server openssh-client iproute2 util-linux procps socat cpio
python3 python3-venv python3-pip python3-lxml python3-click tox make
help2man xsltproc docbook-xsl man-db groff-base bash
prometheus prometheus-node-exporter ansible-core
systemd"

# pacemaker-remoted for the sandbox's Stateful bundle images. The Debian package
# pacemaker-remote CONFLICTS with pacemaker (installing it removes pacemaker), so it is only
# unpacked, never installed, into a cache that tests/sandbox/registry.py reads.
REMOTE_CACHE=/var/cache/pcmkimg-sandbox/pacemaker-remote
remote_cache() {
    [ -x "$REMOTE_CACHE/usr/sbin/pacemaker-remoted" ] && return 0
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get -o DPkg::Lock::Timeout=600 download pacemaker-remote) &&
        mkdir -p "$REMOTE_CACHE" && dpkg-deb -x "$tmp"/pacemaker-remote_*.deb "$REMOTE_CACHE"
    rc=$?
    rm -rf "$tmp"
    return $rc
}

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all system packages present"
    [ "$(id -u)" = 0 ] && remote_cache
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing; run as root" >&2
    exit 1
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# Never start services from package scripts: the sandbox starts what it needs.
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get -o DPkg::Lock::Timeout=600 update -q
# shellcheck disable=SC2086
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing
remote_cache
