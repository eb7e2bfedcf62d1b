# Shared settings for the rrds scripts. Sourced, never run.
# shellcheck shell=bash

RRDS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything expensive lives outside the repository, so a fresh clone reuses it.
RRDS_CACHE=${RRDS_CACHE:-/var/cache/rrds}

# Toolchain pins (DESIGN.md section 6).
RRDS_RUST_VERSION=${RRDS_RUST_VERSION:-1.95.0}
RRDS_BINDGEN_VERSION=${RRDS_BINDGEN_VERSION:-0.72.1}
RRDS_LLVM_VERSION=19
# Preferred kernel source package version; the newest 7.2.x is used if this one is gone.
RRDS_KERNEL_PIN=${RRDS_KERNEL_PIN:-}
RRDS_KERNEL_SERIES=7.2

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
