# Shared settings for the rrds scripts. Sourced, never run.
# shellcheck shell=bash

RRDS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything expensive lives outside the repository, so a fresh clone reuses it.
RRDS_CACHE=${RRDS_CACHE:-/var/cache/rrds}

# Toolchain and kernel pins, shared with the Makefile.
. "$RRDS_TOP/scripts/toolchain.env"

export RUSTUP_TOOLCHAIN=$RRDS_RUST_VERSION
export LIBCLANG_PATH=/usr/lib/llvm-$RRDS_LLVM_VERSION/lib
export PATH=$RRDS_CACHE/bin:/usr/lib/llvm-$RRDS_LLVM_VERSION/bin:$HOME/.cargo/bin:$PATH

die() {
	echo "rrds: error: $*" >&2
	exit 1
}

note() {
	echo "rrds: $*" >&2
}
