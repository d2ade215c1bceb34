# One image for both components. The charts run it with
#   command: ["python", "-m", "remote_enforcer"]   (charts/remote-enforcer)
#   command: ["python", "-m", "home_agent"]        (charts/home-agent)
#   command: ["python", "-m", "home_controller"]   (charts/home-agent, controller.enabled)
# as user 65532 on a read-only root filesystem with /tmp as an emptyDir.
#
#   docker build -t ghcr.io/annex/kube-annex:0.1.0 .     # tag = the charts' appVersion
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared shared
COPY annex annex
COPY home_agent home_agent
COPY home_controller home_controller
COPY remote_enforcer remote_enforcer
# the SPDY/3.1 library the agent's kubelet API speaks
COPY spdy3 spdy3
# kubesim, annexctl and annex_demo are not needed in the image; setuptools' package discovery
# finds only what was copied.
RUN python -m venv /opt/annex \
 && /opt/annex/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/annex/bin/pip install --no-cache-dir .

FROM python:${PYTHON_VERSION}-slim
# The read-only root filesystem: no bytecode written at run time (pip compiled it at install).
ENV PATH=/opt/annex/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/annex /opt/annex
USER 65532:65532
# No ENTRYPOINT: each chart sets the command of its component.
CMD ["python", "-m", "remote_enforcer", "--help"]
