#!/bin/sh
# Build the pcmkimg RPM offline with rpmbuild (works with Debian's rpm too).
#
# Usage: sh packaging/build-rpm.sh [--worktree] [--outdir DIR] [--release N]
#
#   (default)     build from HEAD: `git archive HEAD`, reproducible.
#   --worktree    build from the working tree: tracked files as they are now,
#                 plus untracked files that .gitignore does not exclude.
#   --outdir DIR  where to put the .rpm (default: build/ in the repository).
#   --release N   the RPM release (default 1), e.g. to build an upgrade.
#
# The version has one source, __version__ in pcmkimg/__init__.py: setup.cfg
# reads it (attr:), and this script passes it to rpmbuild.
#
# The source tarball, the spec (taken from that tarball) and rpmbuild's trees
# live in a temporary _topdir under build/, removed after a good build (kept
# for inspection after a failed one). rpmbuild runs with --nodeps: Debian has
# no python3-devel, and nothing is fetched. SOURCE_DATE_EPOCH is HEAD's commit
# time and rpm clamps file mtimes to it, so the same tree gives the same files.
#
# The only line on stdout is the path of the .rpm; rpmbuild's output goes to
# stderr. `make rpm` runs this script.
set -eu

usage() {
    sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"
}

die() {
    echo "build-rpm: $*" >&2
    exit 1
}

from=head
outdir=
release=1
while [ $# -gt 0 ]; do
    case $1 in
    --worktree) from=worktree ;;
    --outdir)
        [ $# -ge 2 ] || die "--outdir needs a directory"
        outdir=$2
        shift
        ;;
    --outdir=*) outdir=${1#--outdir=} ;;
    --release)
        [ $# -ge 2 ] || die "--release needs a number"
        release=$2
        shift
        ;;
    --release=*) release=${1#--release=} ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
case $release in
'' | *[!0-9.]* | .* | *.) die "--release must be digits and dots, e.g. 2" ;;
esac

command -v git >/dev/null 2>&1 || die "git not found"
command -v rpmbuild >/dev/null 2>&1 || die "rpmbuild not found (apt-get install rpm)"

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel) || die "not in a git checkout"
[ -n "$outdir" ] || outdir=$repo/build
mkdir -p "$repo/build" "$outdir"
outdir=$(cd "$outdir" && pwd)

top=$(mktemp -d "$repo/build/rpm.XXXXXX")
ok=
built=
cleanup() {
    if [ -n "$ok" ] || [ -z "$built" ]; then
        rm -rf "$top"
    else
        echo "build-rpm: failed; the build tree is kept in $top" >&2
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
mkdir -p "$top/SOURCES" "$top/SPECS" "$top/BUILD" "$top/BUILDROOT" "$top/RPMS" "$top/SRPMS"

if [ "$from" = head ]; then
    tree=$(git -C "$repo" rev-parse --verify 'HEAD^{tree}')
else
    # A private index: HEAD plus the working tree. The real index is untouched.
    GIT_INDEX_FILE=$top/index git -C "$repo" read-tree HEAD
    GIT_INDEX_FILE=$top/index git -C "$repo" add -A
    tree=$(GIT_INDEX_FILE=$top/index git -C "$repo" write-tree)
    rm -f "$top/index"
fi
epoch=$(git -C "$repo" log -1 --format=%ct HEAD)

for f in pcmkimg/__init__.py packaging/pcmkimg.spec packaging/pcmkimg.conf agents/floating-image; do
    if ! git -C "$repo" cat-file -e "$tree:$f" 2>/dev/null; then
        if [ "$from" = head ]; then
            die "$f is not in HEAD; commit it or build with --worktree"
        fi
        die "$f is missing from the working tree"
    fi
done

version=$(git -C "$repo" cat-file -p "$tree:pcmkimg/__init__.py" |
    sed -n 's/^__version__[[:space:]]*=[[:space:]]*"\([^"]*\)"[[:space:]]*$/\1/p' | head -n 1)
case $version in
'' | *[!0-9A-Za-z.+~]*) die "no valid __version__ = \"X.Y.Z\" in pcmkimg/__init__.py" ;;
esac

name=pcmkimg-$version
if [ "$from" = head ]; then
    # A commit, not a tree: the tarball's mtimes are the commit time.
    git -C "$repo" archive --format=tar.gz --prefix="$name/" -o "$top/SOURCES/$name.tar.gz" HEAD
else
    git -C "$repo" archive --format=tar.gz --prefix="$name/" -o "$top/SOURCES/$name.tar.gz" "$tree"
fi
git -C "$repo" cat-file -p "$tree:packaging/pcmkimg.spec" >"$top/SPECS/pcmkimg.spec"

SOURCE_DATE_EPOCH=$epoch
export SOURCE_DATE_EPOCH
built=1
rpmbuild -bb --nodeps \
    --define "_topdir $top" \
    --define "pcmkimg_version $version" \
    --define "pcmkimg_release $release" \
    --define "use_source_date_epoch_as_buildtime 1" \
    --define "clamp_mtime_to_source_date_epoch 1" \
    --define "_buildhost reproducible" \
    "$top/SPECS/pcmkimg.spec" >&2

set -- "$top"/RPMS/noarch/pcmkimg-*.noarch.rpm
[ $# -eq 1 ] && [ -f "$1" ] || die "expected one noarch .rpm under $top/RPMS, found: $*"
rpm=$outdir/$(basename "$1")
# Rename into place: a reader of an older .rpm of the same name is not disturbed.
cp "$1" "$rpm.tmp.$$"
mv -f "$rpm.tmp.$$" "$rpm"
ok=1
echo "$rpm"
