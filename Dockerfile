# One image for every KernelBand service in docker-compose.yml: migrate (kernelband migrate), api (uvicorn),
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

# The project is installed as a wheel would be (migrations, examples and dashboard assets are
# package data); the sources are built in /src and removed, so nothing runs from a source tree.
WORKDIR /src

# Heaviest layers first, so editing the code does not download torch and the dependencies again.
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"
COPY pyproject.toml README.md ./
COPY requirements/ requirements/
# Everything else at the locked versions (requirements/service.txt: no dev tools). torch stays the
# build chosen above, and so does the triton a CUDA torch brought with it.
RUN grep -vE '^(torch|triton)==' requirements/service.txt > /tmp/requirements.txt \
    && pip install --no-deps -r /tmp/requirements.txt \
    && (python -c "import triton" 2>/dev/null \
        || pip install --no-deps "$(grep -E '^triton==' requirements/service.txt)") \
    && rm /tmp/requirements.txt

COPY kernelband/ kernelband/
COPY services/ services/
# pip check fails the build if a dependency broke torch's own pins (triton, with a CUDA torch).
RUN pip install --no-deps . \
    && pip check \
    && cd / && rm -rf /src

WORKDIR /app

# A non-root user owns only the data directory (KERNELBAND_DATA_DIR defaults to
# ./kernelband-data); the code stays root-owned, so candidate kernels cannot rewrite it.
RUN groupadd --gid 10001 kernelband \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/kernelband \
        --shell /usr/sbin/nologin kernelband \
    && mkdir -p /app/kernelband-data \
    && chown kernelband:kernelband /app/kernelband-data
USER 10001:10001

EXPOSE 8000
