# One image for every KernelBand service in docker-compose.yml: migrate (alembic), api (uvicorn),
# scheduler (python -m services.scheduler) and the Celery workers. Compose gives each service
# its command and its healthcheck, so this file sets neither CMD nor HEALTHCHECK.
#
# The default build is the CPU image (`make up`). torch is not a dependency in pyproject.toml,
# so its build is chosen here. For GPU workers, build a CUDA image from the PyTorch wheel index
# that matches the host's driver and point compose at it, for example:
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 -t kernelband:cuda .
#   KERNELBAND_IMAGE=kernelband:cuda docker compose --profile gpu-h100 up -d --no-build worker-gpu-h100
# TORCH_SPEC changes the torch version the same way (--build-arg TORCH_SPEC=torch==X.Y.Z).
FROM python:3.11-slim

ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    LITELLM_LOCAL_MODEL_COST_MAP=True

# procps: pgrep, used by the scheduler's compose healthcheck. gcc and libc6-dev: Triton compiles
# its small C launcher with the system compiler the first time a kernel runs on a GPU.
RUN apt-get update \
    && apt-get install -y --no-install-recommends procps gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Heaviest layers first, so editing the code does not download torch and the dependencies again.
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY kernelband/ kernelband/
COPY services/ services/
COPY migrations/ migrations/
COPY alembic.ini ./
# Non-editable install: console scripts (kernelband) and any dependency the layer above missed.
# pip check fails the build if a dependency broke torch's own pins (triton, with a CUDA torch).
RUN pip install . \
    && pip check \
    && rm -rf build kernelband.egg-info \
    && python -m compileall -q kernelband services migrations

# The code runs from /app, not from the installed copy: kernelband.db finds migrations/ and
# alembic.ini beside the kernelband/ package, and the dashboard's templates and static files are
# not package data. The image carries no dev extra (pytest, ruff, mypy, playwright).
ENV PYTHONPATH=/app

# A non-root user owns only the data directory (KERNELBAND_DATA_DIR defaults to
# ./kernelband-data); the code stays root-owned, so candidate kernels cannot rewrite it.
RUN groupadd --gid 10001 kernelband \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/kernelband \
        --shell /usr/sbin/nologin kernelband \
    && mkdir -p /app/kernelband-data \
    && chown kernelband:kernelband /app/kernelband-data
USER 10001:10001

EXPOSE 8000
