#!/bin/sh
# Installs the Debian packages qir's build and tests need, or prints the exact
# command when not root.  Optional packages (nvcc, hipcc, python3-onnx) are never required:
# the tests that need them say SKIPPED.
set -e
required="make gcc flex bison graphviz llvm-14-tools protobuf-c-compiler libprotobuf-c-dev libonnx-dev python3 protobuf-compiler"
optional="hipcc libamdhip64-dev python3-onnx python3-numpy"
missing=""
for p in $required; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
want_optional=""
for p in $optional; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || want_optional="$want_optional $p"
done
[ -z "$missing$want_optional" ] && exit 0
# As root, or with password-less sudo, install; otherwise say exactly what to run.
if [ "$(id -u)" = 0 ]; then as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"
else as_root="none"
fi
if [ "$as_root" != none ]; then
  export DEBIAN_FRONTEND=noninteractive
  $as_root apt-get update -qq >/dev/null 2>&1 || true
  if [ -n "$missing" ]; then
    echo "deps: installing$missing"
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
  if [ -n "$want_optional" ]; then
    echo "deps: installing optional$want_optional (HIP compile checks; the ONNX generators of the transformer, LSTM and NASNet tests)"
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $want_optional >/dev/null 2>&1 ||
      echo "deps: optional$want_optional not installed; the tests that need them say UNSUPPORTED or SKIPPED"
  fi
elif [ -n "$missing" ]; then
  echo "qir needs these Debian packages. Run:"
  echo "  sudo apt-get install -y$missing"
  echo "(optional, for HIP compile checks and the generated ONNX tests: sudo apt-get install -y$want_optional)"
  exit 1
fi
