# The yuniplace image: one Python package, several entry points (`yuniplace controller`, `webhook`,
# `validate`, `status`). The Helm chart in charts/yuniplace runs `yuniplace controller`.
#
#   docker build -t ghcr.io/yuniplace/yuniplace:0.1.0 .
#
# BASE is any image with Python 3.11+ whose `pip` installs onto PATH. Without a registry,
# scripts/kind-image builds one from Debian's python3 and passes it as --build-arg BASE=...
ARG BASE=python:3.11-slim
FROM ${BASE}

ARG BASE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="yuniplace" \
      org.opencontainers.image.description="Gang scheduling beside the stock kube-scheduler: YuniKorn-style task groups, placeholder reservations and all-or-nothing starts" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what the package build reads (see .dockerignore), so edits to tests or charts keep the cache.
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY yuniplace ./yuniplace
RUN pip install --no-cache-dir . \
    && rm -rf /src \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot

# The same uid the chart's securityContext sets; it needs no writable path but /tmp.
USER 65532:65532
WORKDIR /
EXPOSE 8080 9443
ENTRYPOINT ["yuniplace"]
CMD ["controller"]
