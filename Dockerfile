# The accelsched image: the device plugin DaemonSet (deploy/device-plugin-daemonset.yaml) and the scheduler run it.
#   docker build -t accelsched/accelsched:0.1.0 .
# Without a registry, hack/build-image.sh makes the base from Debian packages and builds this with buildah:
#   hack/build-image.sh    (BASE is then a local Debian bookworm image with its Python 3.11)
ARG BASE=python:3.11-slim
FROM ${BASE}

WORKDIR /src
COPY pyproject.toml README.md ./
COPY accelsched ./accelsched
# accelsched/data/demo links to these (the demo's YAML); the package build copies them into the package.
COPY examples/lab ./examples/lab
COPY deploy ./deploy
# The gRPC stubs are committed (make proto regenerates them), so no protoc is needed here.
RUN pip install --no-cache-dir . && rm -rf /src

WORKDIR /
ENTRYPOINT []
CMD ["accelsched", "--help"]
