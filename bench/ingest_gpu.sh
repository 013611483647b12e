#!/usr/bin/env bash
# The device check of the GPU ingest path (bench/ingest_gpu.py), < 3 minutes.
#
# Here, once:   .venv/bin/python -m bench.ingest_gpu pack          # writes .gpu-ingest/ (ignored)
# Device run:   command "bash bench/ingest_gpu.sh", carry [".gpu-ingest"], timeout_s 300
# Dry run here: PY=.venv/bin/python DEVICE=cpu LIMIT=40 STANDIN=1 bash bench/ingest_gpu.sh
#
# Installs only what the device's python3 lacks (from .gpu-ingest/whl), puts an import-only
# stand-in for scikit-learn / scipy on the path when it has neither (ingest never calls
# them: guards' modules import them at load time), then ingests the packed corpus on the
# GPU and checks its vectors against the CPU ones. Prints one JSON line; $OUT/ingest_gpu.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=${PACK:-.gpu-ingest}
OUT=${OUT:-/tmp/gp-out}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
WORK=$(mktemp -d /tmp/gp-ingest.XXXXXX)
mkdir -p "$OUT" "$WORK/site"
need=()
for pair in pydantic:pydantic pydantic_core:pydantic_core annotated_types:annotated_types \
            typing_inspection:typing_inspection pysbd:pysbd hnswlib:hnswlib; do
  mod=${pair%%:*}; whl=${pair##*:}
  $PY -c "import $mod" 2>/dev/null || need+=("$PACK"/whl/${whl}-*.whl)
done
if [ ${#need[@]} -gt 0 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "${need[@]}"
fi
if [ -n "${STANDIN:-}" ] || ! $PY -c "import sklearn, scipy" 2>/dev/null; then
  # put on sys.path by bench.ingest_gpu only after transformers loaded (it must not see it)
  export GP_STANDIN="$WORK/standin"
  mkdir -p "$GP_STANDIN/sklearn/feature_extraction" "$GP_STANDIN/scipy"
  touch "$GP_STANDIN/sklearn/__init__.py" "$GP_STANDIN/sklearn/feature_extraction/__init__.py"
  cat > "$GP_STANDIN/sklearn/feature_extraction/text.py" <<PY
"""Import-only stand-in (bench/ingest_gpu.sh): ingest never fits a TF-IDF."""
import json
ENGLISH_STOP_WORDS = frozenset(json.load(open("$PWD/$PACK/stopwords.json")))
class TfidfVectorizer:
    def __init__(self, **kwargs): pass
    def build_analyzer(self):
        def analyze(text):
            raise RuntimeError("scikit-learn stand-in: TF-IDF is not available here")
        return analyze
PY
  echo '"""Import-only stand-in (bench/ingest_gpu.sh)."""' > "$GP_STANDIN/scipy/__init__.py"
  echo '"""Import-only stand-in (bench/ingest_gpu.sh)."""' > "$GP_STANDIN/scipy/sparse.py"
  echo "scikit-learn / scipy: import-only stand-in" | tee "$OUT/ingest_gpu.log"
fi
mkdir -p .gp-root && ln -sfn .. .gp-root/groundproxy
export PYTHONPATH="$WORK/site:$PWD/.gp-root:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee -a "$OUT/ingest_gpu.log" || true
$PY -m bench.ingest_gpu run --pack "$PACK" --device "$DEVICE" --out "$OUT" --limit "${LIMIT:-0}" 2>&1 | tee -a "$OUT/ingest_gpu.log"
rm -rf "$WORK"
