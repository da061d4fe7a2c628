#!/usr/bin/env bash
# offline-deps.sh - the build's library packages for a machine that lacks
# them and cannot reach a package mirror (a borrowed GPU box, say): fetch
# Debian's .deb files where apt works, take the folder along, and there
# unpack them into a private prefix and build against it. Nothing is
# installed system-wide, so the machine's own packages are left alone.
#
#   scripts/offline-deps.sh fetch DIR           # where apt works: download into DIR
#   eval "$(scripts/offline-deps.sh unpack DIR)"   # on the other machine: unpack
#                                               # into DIR/root, export the paths
#
# After `unpack`, `cmake` finds the libraries through PKG_CONFIG_PATH, and the
# linker and the tests find their shared objects through LD_LIBRARY_PATH
# (the exports it prints). scripts/gpu-check.sh does this itself with DEPS=DIR.
set -euo pipefail

# the -dev packages the build links (CMakeLists.txt's pkg_check_modules), the
# runtime libraries they name, and what libmicrohttpd's TLS support pulls in
PKGS="libjansson-dev libjansson4 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
libutf8proc-dev libutf8proc2 libmicrohttpd-dev libmicrohttpd12 libgnutls30 libp11-kit0 libidn2-0
libunistring2 libtasn1-6 libnettle8 libhogweed6 libgmp10 libffi8"

cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 fetch|unpack DIR" >&2; exit 2; }

case $cmd in
fetch)
    mkdir -p "$dir"
    # shellcheck disable=SC2086 # one word per package
    (cd "$dir" && apt-get download $PKGS)
    ls "$dir"/*.deb | wc -l | sed 's/$/ packages in '"${dir//\//\\/}"'/' >&2
    ;;
unpack)
    dir=$(cd "$dir" && pwd)
    root=$dir/root
    ls "$dir"/*.deb >/dev/null 2>&1 || { echo "$0: no .deb files in $dir" >&2; exit 1; }
    mkdir -p "$root"
    for f in "$dir"/*.deb; do dpkg -x "$f" "$root"; done
    lib=$root/usr/lib/x86_64-linux-gnu
    # the .pc files name /usr as their prefix, and Requires.private lines
    # name packages (gnutls ...) whose .pc files are not carried
    for pc in "$lib"/pkgconfig/*.pc; do
        sed -i -e "s|^prefix=.*|prefix=$root/usr|" -e '/^Requires.private:/d' "$pc"
    done
    echo "export PKG_CONFIG_PATH=$lib/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
    echo "export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    ;;
*)
    echo "usage: $0 fetch|unpack DIR" >&2
    exit 2
    ;;
esac
