#!/usr/bin/env bash
# The "On a GPU" measurements in one go, on a borrowed card whose python has torch but not every package:
#   bash docs/measure/gpu_run.sh OUT [SECONDS] [PARTS]
# installs the wheels in .whl/ (if any) into its python3, then runs each part of docs/measure/gpu.py in turn
# (GPU_PARTS=tests, default, cpu, add10, bench), copying docs/measured/gpu.json and a log to OUT after each, and
# stops starting parts once SECONDS (default 420) have passed; "extra": add10 at batch 2048 in 600 steps on seeds 0-2, each verified.
out=${1:?usage: gpu_run.sh OUT [SECONDS] [PARTS]}; budget=${2:-420}; parts=${3:-tests default cpu extra bench add10}
start=$SECONDS
export PYTHONUNBUFFERED=1 WANDB_MODE=offline
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 1
fi
py=$(command -v python3)
$py -c "import sys, torch, lightning, hydra, wandb, tokenizers, matplotlib, rich; print(sys.version.split()[0], torch.__version__, lightning.__version__, torch.cuda.get_device_name(0))" 2>&1 | tee "$out/env.log"
left() { echo $((budget - (SECONDS - start))); }
for part in $parts; do
  if [ "$(left)" -lt 20 ]; then echo "skipped $part: out of time" | tee -a "$out/log.txt"; continue; fi
  t0=$SECONDS
  if [ "$part" = extra ]; then
    # a GPU recipe: add10 with 8x the batch in a fifth of the steps (a launch-bound step costs about the same at
    # batch 256 and 2048); measured on an H100: 6-8 s of training, but verify.py passed on seed 0 only
    recipe="experiment=add10 data.batch_size=2048 trainer.max_steps=600 optim.warmup_steps=40 data.hard_fade_steps=800 optim.lr=6e-3"
    for seed in 0 1 2; do
      [ "$(left)" -lt 30 ] && break
      args="$recipe seed=$seed"; dir=/tmp/extra/seed$seed
      t1=$SECONDS
      timeout $(left) $py train.py trainer=gpu $args hydra.run.dir=$dir >> "$out/parts.log" 2>&1; rc=$?
      echo "extra [$args] rc=$rc whole=$((SECONDS - t1))s" | tee -a "$out/log.txt"
      $py - "$dir" "$args" $((SECONDS - t1)) >> "$out/extra.jsonl" <<'P'
import json, subprocess, sys
from pathlib import Path
d, args, whole = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
r = json.loads((d / "results.json").read_text()) if (d / "results.json").is_file() else {}
keep = {k: r.get(k) for k in ("steps", "train_seconds", "test_exact_match", "phases", "maps_seconds", "analysis_seconds", "compile")}
v = subprocess.run([sys.executable, "verify.py", str(d), "--json"], capture_output=True, text=True) if r else None
passed = next(iter(json.loads(v.stdout).values()))["passed"] if v and v.stdout.strip().startswith("{") else None
print(json.dumps({"args": args, "whole_seconds": whole, "verify": passed, **keep}))
P
    done
  else
    GPU_PARTS=$part timeout $(left) $py docs/regenerate.py --only gpu >> "$out/parts.log" 2>&1
    echo "$part rc=$? $((SECONDS - t0))s" | tee -a "$out/log.txt"
    cp docs/measured/gpu.json "$out/gpu.json"
  fi
done
echo "total $((SECONDS - start))s" | tee -a "$out/log.txt"
