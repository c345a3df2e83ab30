# Shared by ./scripts/demo and ./scripts/test: install what is missing, then
# configure and build incrementally into build/. Source it; do not run it.

LOOM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOOM_BUILD="${LOOM_BUILD:-$LOOM_ROOT/build}"
LLVM_PREFIX=/usr/lib/llvm-22

# Debian packages the build and the tests need.
LOOM_PACKAGES=(
  cmake ninja-build ccache
  clang-22 lld-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libclang-rt-22-dev
  libgtest-dev python3 python3-numpy python3-torch python3-pytest pybind11-dev
  libopenblas-dev openmpi-bin libopenmpi-dev coinor-libcbc-dev pkg-config
  strace util-linux python3-venv
)

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Installs the packages in LOOM_PACKAGES that are missing; runs `apt-get update`
# once, and only when something is missing.
loom_install_deps() {
  local missing=()
  local pkg
  for pkg in "${LOOM_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  log "installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    else
      echo "error: missing packages ${missing[*]} and not root (no sudo)" >&2
      return 1
    fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
}

# Configures build/ once (later runs only rebuild what changed) and builds.
loom_build() {
  if [ ! -f "$LOOM_BUILD/build.ninja" ]; then
    log "configuring $LOOM_BUILD"
    cmake -G Ninja -S "$LOOM_ROOT" -B "$LOOM_BUILD" \
      -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
      -DCMAKE_C_COMPILER="$LLVM_PREFIX/bin/clang" \
      -DCMAKE_CXX_COMPILER="$LLVM_PREFIX/bin/clang++" \
      -DLLVM_USE_LINKER=lld \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DPython3_EXECUTABLE=/usr/bin/python3
  fi
  log "building"
  cmake --build "$LOOM_BUILD"
  # The fuzzer's sanitizer build (build/fuzz), after the main one: the two
  # never compile at once.
  if grep -q '^loom-fuzz-build:' <(ninja -C "$LOOM_BUILD" -t targets 2>/dev/null); then
    log "building the fuzzer (ASan + UBSan + libFuzzer)"
    cmake --build "$LOOM_BUILD" --target loom-fuzz-build
  fi
}

loom_setup() {
  loom_install_deps
  loom_build
  export PATH="$LOOM_BUILD/bin:$LLVM_PREFIX/bin:$PATH"
}
