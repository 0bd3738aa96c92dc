#!/bin/bash
# scripts/build.sh - install what the build needs (as root, once) and build in ./build.
# Shared by scripts/demo.sh and scripts/test.sh.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && ! pkg-config --exists libcjson 2>/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(cat .ci/packages)
fi
[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure
make -j"$(nproc)"
