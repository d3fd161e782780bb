# The accelsched image: the device plugin DaemonSet (deploy/device-plugin-daemonset.yaml) and the scheduler run it.
#   docker build -t accelsched/accelsched:0.1.0 .
FROM python:3.11-slim

WORKDIR /src
COPY pyproject.toml README.md ./
COPY accelsched ./accelsched
# The gRPC stubs are committed (make proto regenerates them), so no protoc is needed here.
RUN pip install --no-cache-dir . && rm -rf /src

WORKDIR /
ENTRYPOINT []
CMD ["accelsched", "--help"]
