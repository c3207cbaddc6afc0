#!/usr/bin/env bash
# Every GPU check of issue 20 in one go, for a lent CUDA machine (one lease, few calls).
#
#   ../shared/tools/device-pack                  # here: packs ray, pydantic, deepspeed... into .dev/
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_17_x86_64 -d .dev/whl omegaconf==2.4.0
#                                                # the importers' omegaconf, which the pack lacks
#   source .dev/setup.sh && bash bench/gpu_all.sh OUT_DIR    # there
#
# The timing benches first, each alone on the machine, then the whole suite beside
# `pytest -m gpu` (about 10 minutes on an H200). The device tool allows 600 s a call: run
# `SKIP_SUITE=1 bash bench/gpu_all.sh OUT` (the timing benches), then `SUITE_ONLY=1 bash
# bench/gpu_all.sh OUT` (the suites) in a second call. Writes into OUT_DIR, as each step
# ends, so a cut-off run keeps what it did:
#   env.txt           device, driver, versions, imports
#   offload.json      bench/gpu_offload.py --part llama (1.1B Llama + AdamW vs a pinned copy)
#   grpo.json         bench/gpu_grpo.py --model 8x1024 (measured vs planned period, memory per op)
#   pass_speed.json   bench/gpu_pass_speed.py (Qwen2.5-0.5B..7B passes and AdamW steps; .txt: vs the estimate)
#   fsdp_overhead.json bench/gpu_fsdp_overhead.py (the same passes plain and under FSDP2 on one GPU)
#   grpo.tgz          its plan.json, config.yaml, record.jsonl and the rehearsal's record
#   weight_sync.json  bench/gpu_weight_sync.py (0.41 GB colocated, IPC vs object store)
#   entropy.txt       bench/logits_memory.py --compiled --device cuda (verl's entropy, eager and compiled)
#   suite.log         the whole suite but the `gpu` tests
#   gpu_tests.log     pytest -m gpu (the scripts' checks, GRPO learning, CUDA peak memory)
# The browser tests are left out there: the machine has no Chromium (CI runs them).
set -u
out=${1:?usage: bench/gpu_all.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
py=${PYTHON:-python3}
workers=${SUITE_WORKERS:-8}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  nproc
  free -g | head -2
  $py - <<'EOF'
import importlib
# omegaconf is not in the device pack: the header says how to add its wheel to .dev/whl.
for name in ("torch", "transformers", "ray", "deepspeed", "pydantic", "omegaconf", "pynvml", "rlplex"):
    try:
        mod = importlib.import_module(name)
        print(name, getattr(mod, "__version__", "?"))
    except Exception as exc:  # report and go on: the steps below say what breaks
        print(name, "IMPORT FAILED:", type(exc).__name__, exc)
import torch
print("cuda", torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.device_count())
EOF
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

step() {  # step NAME SECONDS FILE COMMAND...: run with a limit, keep the output, say how it went
  local name=$1 limit=$2 file=$3
  shift 3
  local t0=$SECONDS
  timeout "$limit" "$@" >"$file" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s"
}

if [ "${SUITE_ONLY:-0}" != 1 ]; then
  # Timing first, alone: the copy speeds and the executor's period are what the suite would disturb.
  step offload 120 "$out/offload.json" $py bench/gpu_offload.py --part llama
  step pass_speed 150 "$out/pass_speed.txt" $py bench/gpu_pass_speed.py --out "$out/pass_speed.json"
  step fsdp_overhead 120 "$out/fsdp_overhead.txt" $py bench/gpu_fsdp_overhead.py --out "$out/fsdp_overhead.json"
  step grpo 200 "$out/grpo.json" $py bench/gpu_grpo.py --model 8x1024 --steps 30 --out "$out/grpo"
  tar -czf "$out/grpo.tgz" -C "$out" grpo && rm -rf "$out/grpo"
  step weight_sync 60 "$out/weight_sync.json" $py bench/gpu_weight_sync.py
  step entropy 120 "$out/entropy.txt" $py bench/logits_memory.py --compiled --device cuda --stand-in
  tail -5 "$out/pass_speed.txt"
  tail -2 "$out/fsdp_overhead.txt"
  tail -4 "$out/entropy.txt"
  for f in offload grpo weight_sync; do
    echo "== $f"
    tail -c 2500 "$out/$f.json"
  done
fi
if [ "${SKIP_SUITE:-0}" = 1 ]; then
  exit 0
fi
# Then the suite (CPU-bound) beside the gpu tests (-s: the peak-memory test prints its
# estimate and both measured peaks).
step suite 330 "$out/suite.log" $py -m pytest -q -n "$workers" -m "not gpu" tests \
  --deselect tests/viz/test_html.py -p no:cacheprovider &
suite=$!
{
  timeout 120 $py -m pytest -v -s -m gpu tests/estimate/test_cuda_peak_memory.py \
    tests/runtime/test_gpu_memory_stats.py -p no:cacheprovider -rs
  first=$?
  timeout 300 $py -m pytest -v -n 3 -m gpu tests -p no:cacheprovider -rs \
    --deselect tests/estimate/test_cuda_peak_memory.py --deselect tests/runtime/test_gpu_memory_stats.py
  echo "== gpu_tests: exit $first (peak memory, memory tracker), $? (the others)"
} >"$out/gpu_tests.log" 2>&1
grep "== gpu_tests" "$out/gpu_tests.log"
wait $suite
tail -15 "$out/gpu_tests.log"
tail -3 "$out/suite.log"
