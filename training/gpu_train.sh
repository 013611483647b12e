#!/usr/bin/env bash
# One short accelerator run: fine-tune the cross-encoder on EVERY row of ../shared/data/train,
# score it on the eval files, and hand back its weights — inside one device `run` (≤ 10 min).
#
# Here, once:   .venv/bin/python -m training.gpu_pack pack        # writes .gpu/ (ignored)
# Device run:   command "bash training/gpu_train.sh", carry [".gpu"], timeout_s 600
# Back here:    .venv/bin/python -m training.gpu_pack unpack <files_at>
#               .venv/bin/python -m training.cross_encoder --eval --onnx \
#                   --ckpt ~/.cache/groundproxy/ce-gpu            # CPU int8 figures, ms/pair
#
# Knobs (env): MINUTES (training time box, default 5), STEPS (the step plan, default 6000),
# BATCH (default 128), LR (default 5e-5), CAP (rows per train file, 0 = all), LIMIT (eval
# rows per file, default 400), PACK (default .gpu), RUNS (plans trained side by side, below),
# THREADS (CPU threads per run). A dry run on a CPU:
#   PACK=.gpu CAP=40 STEPS=4 BATCH=4 LIMIT=20 THREADS=1 OUT=/tmp/gp-out bash training/gpu_train.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${MINUTES:-5}
STEPS=${STEPS:-6000}
BATCH=${BATCH:-128}
LR=${LR:-5e-5}
CAP=${CAP:-0}
LIMIT=${LIMIT:-400}
PACK=${PACK:-.gpu}
OUT=${OUT:-/tmp/gp-out}
WORK=$(mktemp -d /tmp/gp-gpu.XXXXXX)
mkdir -p "$OUT" "$WORK/data"

if ! python3 -c "import pydantic, pysbd" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$PACK"/whl/*.whl
  export PYTHONPATH="$WORK/site"
fi
tar xJf "$PACK/train.tar.xz" -C "$WORK/data"
tar xJf "$PACK/eval.tar.xz" -C "$WORK/data"
tar xJf "$PACK/minilm.tar.xz" -C "$WORK"
mkdir -p .gp-root && ln -sfn .. .gp-root/groundproxy
export PYTHONPATH="$PWD/.gp-root:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee "$OUT/train.log" || true

bf16=$(python3 -c "import torch; print('--bf16' if torch.cuda.is_available() else '')")
# RUNS: one or more "name:steps:lr[:extra flag]" plans trained side by side (the GPU has room
# for several MiniLM runs; 16 cores feed them). The one shipped back is the best by mean ROC-AUC
# on the held-out TRAIN validation split (never by an eval file); every run's manifest and eval
# table go back in runs.json.
RUNS=${RUNS:-"a:$STEPS:$LR b:$((STEPS / 2)):3e-5"}
THREADS=${THREADS:-8}
pids=()
for run in $RUNS; do
  IFS=: read -r name steps lr extra <<<"$run"
  (
    python3 -m training.cross_encoder --data "$WORK/data" --cap "$CAP" \
      --steps "$steps" --minutes "$MINUTES" --batch-size "$BATCH" --lr "$lr" \
      --threads "$THREADS" --backbone "$WORK/minilm" --out "$WORK/ckpt-$name" $bf16 $extra \
      >"$WORK/$name.log" 2>&1
    python3 -m training.cross_encoder --eval --ckpt "$WORK/ckpt-$name" \
      --data "$WORK/data" --limit "$LIMIT" --threads "$THREADS" >>"$WORK/$name.log" 2>&1
  ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || echo "a run failed (exit $?)" | tee -a "$OUT/train.log"; done
for run in $RUNS; do
  name=${run%%:*}
  { echo "=== run $run"; grep -v '^step ' "$WORK/$name.log" | tail -n 80; } | tee -a "$OUT/train.log"
done
best=$(python3 - "$WORK" $RUNS <<'PY'
import json, sys
from pathlib import Path
work, runs = Path(sys.argv[1]), sys.argv[2:]
out, best = {}, (None, -1.0)
for run in runs:
    name = run.split(":")[0]
    ckpt = work / f"ckpt-{name}"
    entry = {"plan": run}
    for f in ("ce_manifest.json", "ce_eval.json"):
        if (ckpt / f).is_file():
            entry[f] = json.loads((ckpt / f).read_text())
    entry.get("ce_manifest.json", {}).pop("data_files", None)
    out[name] = entry
    auc = entry.get("ce_manifest.json", {}).get("validation", {}).get("mean_roc_auc", -1.0)
    if auc > best[1]:
        best = (name, auc)
(work / "runs.json").write_text(json.dumps(out, indent=1) + "\n")
print(best[0])
PY
)
echo "best run by validation mean ROC-AUC: $best" | tee -a "$OUT/train.log"
cp "$WORK/runs.json" "$OUT/"
cp "$WORK/ckpt-$best/config.json" "$WORK/ckpt-$best/ce_manifest.json" \
  "$WORK/ckpt-$best/ce_eval.json" "$OUT/"
python3 -m training.gpu_pack split "$WORK/ckpt-$best" "$OUT"
ls -la "$OUT"
