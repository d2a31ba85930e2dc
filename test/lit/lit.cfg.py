# lit configuration for every qir test under test/lit.
#
#   QIR_BIN=build/bin python3 /usr/lib/llvm-14/build/utils/lit/lit.py -sv test/lit
#
# Tool names in RUN lines (qopt, onnx2qir, qcodegen, qviz, qrun) run the
# binaries in $QIR_BIN (default <repo>/build/bin); %onnx_tests is the shared ONNX
# test data ($ONNX_TESTS), and the feature `onnx-tests` says whether it exists.

import os
import shutil

import lit.formats

config.name = "qir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".qir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)

repo = os.path.abspath(os.path.join(config.test_source_root, "..", ".."))
qir_bin = os.path.abspath(os.environ.get("QIR_BIN", os.path.join(repo, "build", "bin")))
onnx_tests = os.path.abspath(
    os.environ.get("ONNX_TESTS", os.path.join(repo, "..", "shared", "onnx-tests")))
llvm_bin = "/usr/lib/llvm-14/bin"

# Build outputs of tests go next to the build, not into the source tree.
config.test_exec_root = os.path.join(os.path.dirname(qir_bin), "lit-out")

config.environment["QIR_BIN"] = qir_bin
config.environment["ONNX_TESTS"] = onnx_tests
config.environment["PATH"] = os.pathsep.join(
    [qir_bin, llvm_bin, config.environment.get("PATH", os.environ.get("PATH", ""))])
# Tests write only under the build folder or temporary ones: no bytecode caches
# next to the scripts they run (make check fails on new files in the tree).
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
for var in ["HOME", "TMPDIR", "CC", "CUDA_HOME", "ROCM_PATH", "LANG", "LC_ALL"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]
# Sanitizer builds (make SAN=1) fail loudly on leaks and undefined behaviour.
config.environment["ASAN_OPTIONS"] = os.environ.get(
    "ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
config.environment["UBSAN_OPTIONS"] = os.environ.get(
    "UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")

# Longest names first, so that e.g. `qopt` never rewrites part of a longer word.
for tool in ["onnx2qir", "qcodegen", "qopt", "qviz", "qrun"]:
    config.substitutions.append(
        (r"(?<![-\w/.%])" + tool + r"(?![-\w/.])", os.path.join(qir_bin, tool)))
config.substitutions.append((r"(?<![-\w/.])FileCheck(?![-\w/.])", os.path.join(llvm_bin, "FileCheck")))
# `not` only where a command starts, so an argument spelled "not" stays.
config.substitutions.append((r"(^\s*|[|;&(]\s*)not(?=\s)", "\\1" + os.path.join(llvm_bin, "not")))
config.substitutions.append(("%onnx_tests", onnx_tests))
config.substitutions.append(("%qir_bin", qir_bin))
config.substitutions.append(("%repo", repo))
# The library next to the tools (make's $(BUILD)/libqir.a), for tests that
# compile a small C program against the API (feature `qir-lib`).
qir_lib = os.path.join(os.path.dirname(qir_bin), "libqir.a")
config.substitutions.append(("%qir_lib", qir_lib))
cc = os.environ.get("CC", "cc")
if os.path.exists(qir_lib):
    config.available_features.add("qir-lib")
    with open(qir_lib, "rb") as f:  # a SAN=1 library links only with the sanitizers
        if b"__asan_" in f.read():
            cc += " -fsanitize=address,undefined"
config.substitutions.append(("%{cc}", cc))

if os.path.isdir(onnx_tests):
    config.available_features.add("onnx-tests")
nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
if nvcc:
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))
if shutil.which("hipcc"):
    config.available_features.add("hipcc")
# Debian's python3 with the onnx and numpy modules (generators of ONNX test
# models, e.g. test/transformers): feature `python-onnx`, %sys_python.
import subprocess
sys_python = "/usr/bin/python3"
try:
    if subprocess.run([sys_python, "-c", "import onnx, numpy"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, timeout=60).returncode == 0:
        config.available_features.add("python-onnx")
except (OSError, subprocess.SubprocessError):
    pass
config.substitutions.append(("%sys_python", sys_python))
