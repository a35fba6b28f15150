# syntax=docker/dockerfile:1
#
# One image for every role of the stack: the Dagster webserver, the daemon, the user-code gRPC server, a Celery
# worker and the search service. The role is the command (deploy/compose.yaml gives each service its own); without
# one the container runs the search service. Build and run: docs/guides/container.md.
#
#   docker build -t rag-pipeline .
#
# Python 3.11 as the project's pins were verified on (pyproject.toml), on Debian 12 like the machines that verified
# them. The tag names the exact patch release (docker-library's official `python` tags), so a rebuild gets the same
# interpreter; pin the digest as well (python:3.11.14-slim-bookworm@sha256:...) where builds must be bit-identical.
FROM python:3.11.14-slim-bookworm

# The CPU build of torch comes from PyTorch's own index: PyPI's Linux torch wheel depends on GBs of CUDA packages.
# Where that index is out of reach, TORCH_FIND_LINKS names a folder (mounted into the build: `podman build -v
# /opt/wheels:/wheels:ro --build-arg TORCH_FIND_LINKS=/wheels`) holding the CPU wheel, and torch's own
# dependencies come from PyPI (2.13.0+cpu outranks PyPI's 2.13.0). Either way the build fails if the torch
# installed is not the CPU build (a silent fallback installed the CUDA one).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_FIND_LINKS=
# A CA bundle for a TLS-intercepting proxy between the build and PyPI, mounted into the build with the same -v
# (unset: pip's own bundle). Read by pip during the build only; not kept in the image.
ARG PIP_CERT
# Dense models whose OpenVINO conversion is made at build time (`english`: all-MiniLM-L6-v2, the default). Add
# `cjk` (multilingual-e5-small, about 1 GB more) for an index of Japanese, Chinese or Korean text; a model not
# warmed here is converted on first use (~10 s), in the container's own layer.
ARG WARM_LANGUAGES=english

# The interpreter and pip: no .pyc next to read-only sources, logs unbuffered (docker logs shows them at once),
# no pip self-update check. The venv's bin comes first on PATH, so `rag-pipeline`, `dagster`, `dagster-webserver`,
# `dagster-daemon` and `python` are the project's.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# LightGBM (the learned reranker) links the system's OpenMP runtime; nothing else needs a Debian package (every
# other dependency is a manylinux wheel with its libraries inside). Not version-pinned: the base image's tag
# fixes the Debian release, and a pinned Debian version disappears from the archive with its next security update.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*

# A fixed, non-root user (uid/gid 10001, the fsGroup deploy/k8s uses), so files it writes on shared volumes have
# one owner whichever container wrote them. Its folders exist in the image, owned by it: a named volume mounted on
# one starts with that ownership.
RUN groupadd --system --gid 10001 rag \
    && useradd --system --uid 10001 --gid rag --create-home --home-dir /home/rag --shell /usr/sbin/nologin rag \
    && mkdir -p /opt/rag/models /var/lib/rag /var/lib/dagster /opt/dagster/home \
    && chown -R rag:rag /opt/rag /var/lib/rag /var/lib/dagster /opt/dagster

RUN python -m venv "$VIRTUAL_ENV"

WORKDIR /opt/rag/src

# Dependencies first, in layers that only pyproject.toml invalidates: a code change reinstalls the project alone.
# The libraries' own test suites are deleted in the same layer (~280 MB: pandas, numba, scipy, torch's; nothing
# imports them at run time); the .pyc files (~490 MB) stay: without them every container start compiles its
# imports again.
# pyproject.toml's dependency list becomes two requirements files: torch alone (torch==2.13.0, which the CPU index
# serves as 2.13.0+cpu, satisfying the pin) and everything else, then resolved against the torch installed.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; open('/tmp/torch.txt', 'w').write('\n'.join(d for d in deps if d.startswith('torch')) + '\n'); open('/tmp/requirements.txt', 'w').write('\n'.join(deps) + '\n')" \
    && if [ -n "$TORCH_FIND_LINKS" ]; then set -- --find-links "$TORCH_FIND_LINKS"; else set -- --index-url "$TORCH_INDEX_URL"; fi \
    && pip install --no-cache-dir "$@" --requirement /tmp/torch.txt \
    && python -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else f'torch {torch.__version__} is a CUDA build: the CPU wheel was not found ({sys.argv[1:]})')" "$@" \
    && pip install --no-cache-dir --requirement /tmp/requirements.txt \
    && python -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else f'the requirements replaced the CPU torch with {torch.__version__}')" \
    && find "$VIRTUAL_ENV" -depth -type d -name tests -path '*/site-packages/*' -exec rm -rf {} + \
    && rm -rf "$VIRTUAL_ENV/lib/python3.11/site-packages/torch/test" \
    && rm /tmp/torch.txt /tmp/requirements.txt

# The project itself (its package data holds the bundled Slack export and Jira dump). Not editable: the image runs
# the installed package, and the sources are removed after the install.
COPY rag_pipeline ./rag_pipeline
RUN pip install --no-cache-dir . \
    && rm -rf /opt/rag/src

# The eval sets live next to the package in a checkout, not in the wheel: RAG_EVAL_DIR points at this copy.
# Copied as root, like the code: the services read them and never change them.
COPY eval_sets /opt/rag/eval_sets
# The workspace of the stack's Dagster processes (the user-code gRPC server). The stack's instance (PostgreSQL
# storage, the run queue, pools) is not baked in: deploy/compose.yaml mounts deploy/dagster.compose.yaml at
# /opt/dagster/home/dagster.yaml and sets DAGSTER_HOME there. Without it (a single job in one container, `docker
# run -v rag-data:/var/lib/rag rag-pipeline rag-pipeline demo`) the commands use their own SQLite instance in the
# data volume (<RAG_DATA_DIR>/dagster_home), so nothing needs PostgreSQL.
COPY deploy/workspace.compose.yaml /opt/dagster/workspace.yaml

# Where each part of the project keeps its state (docs/guides/configuration.md):
# - RAG_DATA_DIR: parquet, embedding cache, principal directory (a volume shared by the code server, the workers
#   and the search service in deploy/compose.yaml);
# - RAG_MODEL_CACHE: converted models, made below and shipped in the image;
# - RAG_EVAL_DIR: the eval sets copied above;
# - DAGSTER_HOME: unset here (above); deploy/compose.yaml sets it for the stack.
ENV RAG_DATA_DIR=/var/lib/rag \
    RAG_MODEL_CACHE=/opt/rag/models \
    RAG_EVAL_DIR=/opt/rag/eval_sets

USER 10001:10001
WORKDIR /home/rag

# Warm the conversion cache as the user that runs the services, with the cache folder set as at run time: each
# container then loads the OpenVINO model in a second instead of converting it (~10 s, and torch in memory).
# RAG_DENSE_BACKEND=openvino makes a failed conversion fail the build instead of falling back to torch quietly.
RUN RAG_DENSE_BACKEND=openvino python -c "from rag_pipeline.settings import Settings; from rag_pipeline.vectors.dense.load import load_dense_encoder; settings = Settings.from_env(); [print(language, load_dense_encoder((s := settings.with_language(language)).dense_model, s.dense_backend, s.dense_device, s.model_cache).encode_documents(['warm-up']).shape) for language in '${WARM_LANGUAGES}'.split()]"

# 8000: the search service; 3000: the Dagster webserver; 4000: the user-code gRPC server.
EXPOSE 8000 3000 4000

# The default command's health: the search service answers GET /health with 200 once the index is open (503
# before the first index, or while Qdrant is unreachable). Other roles get their own check in deploy/compose.yaml.
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=8).status != 200)"]

# No ENTRYPOINT: the command is the whole command line, so every role is `docker run rag-pipeline <program> ...`
# (rag-pipeline, dagster, dagster-webserver, dagster-daemon) and compose's `command:` replaces it outright. Run
# with an init process (`docker run --init`, `init: true` in compose) to reap the code server's run workers.
# Listening beyond loopback needs RAG_SERVE_TOKEN: `rag-pipeline serve` refuses to start without it.
CMD ["rag-pipeline", "serve", "--host", "0.0.0.0", "--port", "8000"]
