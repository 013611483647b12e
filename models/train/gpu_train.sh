#!/usr/bin/env bash
# One short accelerator run: fine-tune the cross-encoder on EVERY row of ../shared/data/train,
# score it on the eval files, and hand back its weights — inside one device `run` (≤ 10 min).
#
# Here, once:   .venv/bin/python -m models.train.gpu_pack pack        # writes .gpu/ (ignored)
# Device run:   command "bash models/train/gpu_train.sh", carry [".gpu"], timeout_s 600
# Back here:    .venv/bin/python -m models.train.gpu_pack unpack <files_at>
#               .venv/bin/python -m models.train.cross_encoder --eval --onnx \
#                   --ckpt ~/.cache/groundproxy/ce-gpu            # CPU int8 figures, ms/pair
#
# Knobs (env): MINUTES (training time box, default 5), STEPS (the step plan, default 6000),
# BATCH (default 128), LR (default 5e-5), CAP (rows per train file, 0 = all), LIMIT (eval
# rows per file, default 400), PACK (default .gpu). A dry run on a CPU:
#   PACK=.gpu CAP=40 STEPS=4 BATCH=4 LIMIT=20 OUT=/tmp/gp-out bash models/train/gpu_train.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
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
python3 -m groundproxy.models.train.cross_encoder --data "$WORK/data" --cap "$CAP" \
  --steps "$STEPS" --minutes "$MINUTES" --batch-size "$BATCH" --lr "$LR" --threads 8 \
  --backbone "$WORK/minilm" --out "$WORK/ckpt" $bf16 2>&1 | tee -a "$OUT/train.log"
python3 -m groundproxy.models.train.cross_encoder --eval --ckpt "$WORK/ckpt" --data "$WORK/data" \
  --limit "$LIMIT" --threads 8 2>&1 | tee -a "$OUT/train.log"
cp "$WORK/ckpt/config.json" "$WORK/ckpt/ce_manifest.json" "$WORK/ckpt/ce_eval.json" "$OUT/"
python3 -m groundproxy.models.train.gpu_pack split "$WORK/ckpt" "$OUT"
ls -la "$OUT"
