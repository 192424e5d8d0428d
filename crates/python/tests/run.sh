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
