#!/usr/bin/env bash
# Acceptance tests of `formwork serve` with the official Python clients.
#
# Creates a venv (target/python-venv, or $VENV), installs requirements.txt, starts
# `formwork serve` (target/release/formwork, or $FORMWORK_BIN) on a free loopback port with
# the default model (or $FORMWORK_MODEL), waits until it answers, runs pytest (extra
# arguments are passed on), then stops the server with SIGTERM and checks that it exits
# cleanly. The server pulls from no registry (--no-registry-pulls): the tests never reach
# the network. Build first: cargo build --release -p formwork-cli
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${FORMWORK_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/formwork}"
venv="${VENV:-${CARGO_TARGET_DIR:-$root/target}/python-venv}"

if [[ ! -x "$bin" ]]; then
    echo "run.sh: $bin not found; build it with: cargo build --release -p formwork-cli" >&2
    exit 2
fi
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"

port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp -t formwork-serve.XXXXXX.log)"
model_args=()
if [[ -n "${FORMWORK_MODEL:-}" ]]; then model_args=(--model "$FORMWORK_MODEL"); fi
FORMWORK_LOG="${FORMWORK_LOG:-formwork_server=info,warn}" "$bin" serve --port "$port" --no-registry-pulls "${model_args[@]}" >"$log" 2>&1 &
pid=$!
stop() {
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
}
trap stop EXIT

url="http://127.0.0.1:$port"
echo "run.sh: waiting for formwork serve on $url (log: $log)"
for _ in $(seq 1 600); do
    if "$venv/bin/python" -c "import urllib.request,sys; urllib.request.urlopen('$url/', timeout=1)" 2>/dev/null; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "run.sh: the server exited:" >&2; cat "$log" >&2; exit 1; fi
    sleep 0.5
done

status=0
FORMWORK_URL="$url" OLLAMA_HOST="$url" "$venv/bin/python" -m pytest -v -rA "$here" "$@" || status=$?

# Graceful shutdown: SIGTERM, then the process must exit by itself with status 0.
kill -TERM "$pid"
for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$pid" 2>/dev/null; then echo "run.sh: server did not stop on SIGTERM" >&2; status=1; kill -KILL "$pid"; fi
wait "$pid" 2>/dev/null && echo "run.sh: server stopped cleanly on SIGTERM" || { echo "run.sh: server exit status $?" >&2; status=1; }
trap - EXIT
echo "run.sh: server log: $log ($(grep -c 'formwork_server::access' "$log" || true) request lines)"
exit "$status"
