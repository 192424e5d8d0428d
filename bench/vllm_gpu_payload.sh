#!/usr/bin/env bash
# Builds the payload of bench/vllm_gpu.py's GPU run into .gpu/ (ignored by git): the GPU
# machine reaches no registry and takes at most 64 MiB a call, so everything travels from here.
#   .gpu/p1/vllm.part.aa       first 54 MiB of vLLM 0.25.0 as one tar.xz
#   .gpu/p2/vllm.part.ab       the rest of it
#   .gpu/p2/deps-site.tar.xz   bench/vllm_gpu_deps.txt, installed for CPython 3.12
#   .gpu/p2/formwork-*.whl     this checkout's wheel
#   .gpu/p2/models/            configs + tokenizers of SmolLM2-135M and Llama-3.1-8B (no weights:
#                              the run uses load_format=dummy)
#   .gpu/p2/schemas-b.jsonl    64 MaskBench schemas of half B under 8 KB (seeded choice)
#   .gpu/p2/run.sh             bench/vllm_gpu_device.sh
# vLLM 0.25.0 is the release that pins torch 2.11.0, the GPU image's torch. Its wheel (250 MB)
# travels without FlashAttention 2 (Hopper runs FlashAttention 3), the MoE kernels and the Rust
# front end, none of which a dense model in the offline LLM class loads.
# Needs ~2 GB of scratch in $TMPDIR and the Python venv of crates/python/tests/run.sh (maturin).
#
#   bash bench/vllm_gpu_payload.sh            # build it all (downloads ~300 MB)
#   bash bench/vllm_gpu_payload.sh --refresh  # keep .gpu's vLLM and dependencies; rebuild
#                                             # formwork's wheel and copy the device script
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${FORMWORK_PY_VENV:-${FORMWORK_HOME:-$HOME/.cache/formwork}/python-package-venv}"
if [[ "${1:-}" == --refresh ]]; then
    if [[ ! -f .gpu/p1/vllm.part.aa || ! -f .gpu/p2/vllm.part.ab || ! -f .gpu/p2/deps-site.tar.xz ]]; then
        echo "vllm_gpu_payload.sh: no payload in .gpu to refresh; run it without --refresh first" >&2
        exit 2
    fi
    rm -f .gpu/p2/formwork-*.whl
    "$venv/bin/maturin" build --release --quiet -m crates/python/Cargo.toml -o .gpu/p2
    cp bench/vllm_gpu_device.sh .gpu/p2/run.sh
    du -sh .gpu/p1 .gpu/p2
    exit 0
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --no-deps)
for n in 5 17 24 26 27 28 31 34 35; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
plat+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
rm -rf .gpu/p1 .gpu/p2; mkdir -p .gpu/p1 .gpu/p2/models

python3 -m pip download -q "${plat[@]}" -d "$work/vllm" vllm==0.25.0
mkdir "$work/vsite"; (cd "$work/vsite" && python3 -m zipfile -e "$work"/vllm/vllm-*.whl .)
rm "$work/vsite/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$work/vsite/vllm/_moe_C_stable_libtorch.abi3.so" "$work/vsite/vllm/vllm-rs"
tar -C "$work/vsite" -cf - . | xz -T0 -6 > "$work/vllm-site.tar.xz"
split -b 54M "$work/vllm-site.tar.xz" "$work/vllm.part."
mv "$work/vllm.part.aa" .gpu/p1/; mv "$work/vllm.part.ab" .gpu/p2/

python3 -m pip download -q "${plat[@]}" -d "$work/deps" -r bench/vllm_gpu_deps.txt
python3 -m pip install -q "${plat[@]}" --no-compile --target "$work/dsite" "$work"/deps/*.whl
tar -C "$work/dsite" -cf - . | xz -T0 -6 > .gpu/p2/deps-site.tar.xz

"$venv/bin/maturin" build --release --quiet -m crates/python/Cargo.toml -o .gpu/p2

python3 - <<'PY'
import glob, hashlib, json, os, random, shutil
base = ".gpu/p2/models"
shared = os.environ.get("FORMWORK_SHARED_DATA", "../shared/data")
smol = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "head_dim": 64, "max_position_embeddings": 8192, "rope_theta": 100000.0,
        "tie_word_embeddings": True, "vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2}
llama = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072, "rope_theta": 500000.0,
         "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192, "rope_type": "llama3"},
         "tie_word_embeddings": False, "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]}
common = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "rms_norm_eps": 1e-5, "hidden_act": "silu",
          "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False}
for name, cfg, tok, bos, eos in [("smollm2", smol, "smollm2.json", "<|im_start|>", "<|im_end|>"),
                                 ("llama31-8b", llama, "llama3_1.json", "<|begin_of_text|>", "<|eot_id|>")]:
    d = f"{base}/{name}"; os.makedirs(d, exist_ok=True)
    json.dump({**common, **cfg}, open(f"{d}/config.json", "w"), indent=1)
    json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]}, open(f"{d}/generation_config.json", "w"))
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos, "model_max_length": 8192,
               "clean_up_tokenization_spaces": False}, open(f"{d}/tokenizer_config.json", "w"), indent=1)
    shutil.copy(f"{shared}/tokenizers/{tok}", f"{d}/tokenizer.json")
files = sorted(glob.glob(f"{shared}/maskbench-dev/*.json"))
half_b = [f for f in files if hashlib.sha256(os.path.basename(f).encode()).digest()[0] & 1 == 1]
small = [f for f in half_b if os.path.getsize(f) < 8000]
random.Random(15).shuffle(small)
with open(".gpu/p2/schemas-b.jsonl", "w") as out:
    for f in small[:64]:
        out.write(json.dumps(json.load(open(f))["schema"]) + "\n")
PY
cp bench/vllm_gpu_device.sh .gpu/p2/run.sh
du -sh .gpu/p1 .gpu/p2
