# groundproxy — two stages: a builder that makes the wheel and every dependency's wheel, and a
# slim runtime with no compilers, a non-root user and the embedder's ONNX export baked in.
# Policies are NOT in the image: mount them (they hold the tenants' key hashes).
#
#   docker build -t groundproxy .
#   docker run -p 8080:8080 -v $PWD/policies:/etc/groundproxy/policies:ro \
#              -v gp-data:/var/lib/groundproxy groundproxy                  # serve (default)
#   docker run -v gp-data:/var/lib/groundproxy -v $PWD/docs:/docs:ro groundproxy \
#              ingest --tenant acme /docs                                    # any other command
#
# CI cannot run a Docker engine; `make wheel-check` builds the same wheel, installs it into a
# clean venv and starts this file's exact ENTRYPOINT + CMD with its ENV.

# The base image of both stages. Pin it by digest for reproducible builds: the digest is not
# recorded anywhere in this repository and cannot be looked up offline, so it is passed at
# build time (`docker buildx imagetools inspect python:3.11-slim` prints it):
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> -t groundproxy .
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock ./
# torch is the CPU build; every locked dependency becomes a wheel for the runtime stage.
RUN pip wheel --wheel-dir /wheels --extra-index-url https://download.pytorch.org/whl/cpu \
        -r requirements.lock
COPY pyproject.toml README.md ./
COPY errors ./errors
COPY proxy ./proxy
COPY guards ./guards
COPY retrieval ./retrieval
COPY models ./models
COPY policies ./policies
COPY testing ./testing
COPY integrations ./integrations
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
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
    GROUNDPROXY_CACHE=/opt/groundproxy/cache \
    GROUNDPROXY_HOST=0.0.0.0 \
    GROUNDPROXY_PORT=8080
COPY --from=builder /wheels /wheels
RUN pip install --no-index --find-links /wheels "groundproxy==0.1.0" \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --home-dir /var/lib/groundproxy groundproxy \
    && mkdir -p /etc/groundproxy/policies /var/lib/groundproxy \
    && chown -R groundproxy:groundproxy /var/lib/groundproxy \
    && python -c "from groundproxy.proxy.settings import Settings; from groundproxy.retrieval.onnx_embedder import ensure_exported; ensure_exported('fp32', root=Settings().cache)" \
    && chmod -R a+rX /opt/groundproxy/cache
WORKDIR /var/lib/groundproxy
USER 10001
EXPOSE 8080
VOLUME ["/var/lib/groundproxy"]

# The port is GROUNDPROXY_PORT (`docker run -e GROUNDPROXY_PORT=9000 -p 9000:9000 …`): serve
# and this check both read it, so they never disagree.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os,sys,urllib.request; url = 'http://127.0.0.1:%s/healthz' % os.environ.get('GROUNDPROXY_PORT', '8080'); sys.exit(0 if urllib.request.urlopen(url, timeout=2).status == 200 else 1)"]

ENTRYPOINT ["groundproxy"]
CMD ["serve"]
