# One image for both components. The charts run it with
#   command: ["python", "-m", "remote_enforcer"]   (charts/remote-enforcer)
#   command: ["python", "-m", "home_agent"]        (charts/home-agent)
#   command: ["python", "-m", "home_controller"]   (charts/home-agent, controller.enabled)
#   command: ["python", "-m", "annexctl"]          (the charts' uninstall hooks)
# as user 65532 on a read-only root filesystem with /tmp as an emptyDir.
#
#   docker build -t ghcr.io/annex/kube-annex:0.1.0 \
#       --build-arg ANNEX_GIT_COMMIT=$(git rev-parse --short HEAD) .   # tag = the charts' appVersion
#
# The runtime is distroless (Debian 12's Python 3.11, no shell, no pip): the build stage is
# Debian 12 too, so the virtualenv's interpreter (/usr/bin/python3) is the same one. The
# third-party packages come from requirements/image.txt, pinned with hashes (regenerate it with
# the command at its top after changing pyproject.toml's dependencies or the cli or tracing extra).
#
# Size: the virtualenv /opt/annex is 203 MB installed (x86_64; measured by running these steps
# outside docker, `du -sh`), on top of the distroless base. The image itself was not built where
# this was measured (no docker daemon): `docker image ls` after a build gives its size.

FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The dependencies first: this layer is rebuilt only when the lock changes.
COPY requirements requirements
RUN python3 -m venv /opt/annex \
 && /opt/annex/bin/pip install --require-hashes --only-binary=:all: -r requirements/image.txt
COPY pyproject.toml README.md ./
# The packages the components and annexctl import (tests/test_image.py checks this set);
# kubesim and annex_demo stay out, and setuptools' package discovery finds only what is here.
COPY shared shared
COPY annex annex
COPY spdy3 spdy3
COPY home_agent home_agent
COPY home_controller home_controller
COPY remote_enforcer remote_enforcer
COPY annexctl annexctl
# The wheel is built with the locked setuptools. Then go: the scripts of what is not in the image,
# kubernetes' asyncio client (68 MB of the 258; nothing imports it) and pip itself (nothing
# installs at run time).
RUN python3 -m venv /opt/wheel-build \
 && /opt/wheel-build/bin/pip install --require-hashes -r requirements/build.txt \
 && /opt/wheel-build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/annex/bin/pip install --no-deps /wheels/*.whl \
 && rm /opt/annex/bin/kubesim /opt/annex/bin/annex-demo \
 && rm -r /opt/annex/lib/python3.11/site-packages/kubernetes/aio \
 && /opt/annex/bin/pip uninstall -y pip setuptools

FROM gcr.io/distroless/python3-debian12:nonroot
ARG ANNEX_GIT_COMMIT=unknown
ARG ANNEX_VERSION=0.1.0
LABEL org.opencontainers.image.title="kube-annex" \
      org.opencontainers.image.description="annex remote enforcer, home agent, home controller and annexctl" \
      org.opencontainers.image.source="https://github.com/annex/kube-annex" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${ANNEX_VERSION}" \
      org.opencontainers.image.revision="${ANNEX_GIT_COMMIT}"
# ANNEX_GIT_COMMIT: the components' User-Agent (annex/<commit>). The read-only root filesystem:
# no bytecode written at run time (pip compiled it at install).
ENV PATH=/opt/annex/bin:/usr/local/bin:/usr/bin:/bin \
    ANNEX_GIT_COMMIT=${ANNEX_GIT_COMMIT} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/annex /opt/annex
USER 65532:65532
# distroless python's entrypoint is python3: cleared, so each chart's command runs as written.
ENTRYPOINT []
CMD ["python", "-m", "remote_enforcer", "--help"]
