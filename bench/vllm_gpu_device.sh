# The device half of bench/vllm_gpu.py's README run: unpacks vLLM 0.25.0 (its wheel without
# FA2, the MoE kernels and the Rust front end), the dependencies the GPU machine's image lacks
# and formwork's wheel (all made by bench/vllm_gpu_payload.sh), then runs the benchmark on
# SmolLM2-135M (CUDA graphs) and on Llama-3.1-8B's shape (eager), random weights both.
# The payload comes in two parts, each under the device tool's 64 MiB: .gpu/p1 (first call:
# copied to /root/stash, kept while the machine stays warm) and .gpu/p2 (second call: this
# script, copied there as run.sh). On the device, from the repository root:
#   bash .gpu/p2/run.sh          # results and logs in $OUT
#   bash .gpu/p2/run.sh llama-mixed   # only the mixed workload on the Llama shape, 2 rounds
set -u
cd "$(dirname "$0")/../.."
P=.gpu/p2; S=/tmp/site; mkdir -p $S
A=/root/stash/vllm.part.aa; [ -f $A ] || A=.gpu/p1/vllm.part.aa
t0=$SECONDS
cat $A $P/vllm.part.ab | python3 -c "import tarfile,sys; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('$S')" || { echo "vllm unpack failed"; exit 3; }
python3 -c "import tarfile; tarfile.open('$P/deps-site.tar.xz').extractall('$S')" || exit 4
python3 -m pip install -q --no-deps --no-index --no-compile --upgrade --target $S/fw $P/formwork-*.whl || exit 5
export PYTHONPATH=$S/fw:$S PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
echo "unpacked in $((SECONDS-t0)) s"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import vllm, formwork, xgrammar, llguidance, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" 2>&1 | tail -3
show() { grep -E '^\{"(summary|given)|INVALID|left out|Error|error:|Traceback|rc=' "$1" | grep -v -E 'WARNING|INFO' | tail -${2:-40}; }
if [ "${1:-all}" = llama-mixed ]; then
  timeout 250 python3 bench/vllm_gpu.py --model-dir $P/models/llama31-8b --eager --rounds 0 --schemas $P/schemas-b.jsonl --mixed-rounds 2 --out $OUT/llama8b-mixed.json > $OUT/llama8b-mixed.log 2>&1; echo "llama mixed rc=$? at $((SECONDS-t0)) s"
  show $OUT/llama8b-mixed.log 30; exit 0
fi
timeout 240 python3 bench/vllm_gpu.py --model-dir $P/models/smollm2 --schemas $P/schemas-b.jsonl --rounds 3 --mixed-rounds 2 --out $OUT/smollm2.json > $OUT/smollm2.log 2>&1; echo "smollm2 rc=$? at $((SECONDS-t0)) s"
show $OUT/smollm2.log; tail -5 $OUT/smollm2.log | cut -c1-300
timeout 190 python3 bench/vllm_gpu.py --model-dir $P/models/llama31-8b --n 128 --eager --rounds 2 --schemas $P/schemas-b.jsonl --mixed-rounds 1 --out $OUT/llama8b.json > $OUT/llama8b.log 2>&1; echo "llama rc=$? at $((SECONDS-t0)) s"
show $OUT/llama8b.log 30; tail -3 $OUT/llama8b.log | cut -c1-300
