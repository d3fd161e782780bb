#!/usr/bin/env bash
# Builds the container image from the root Dockerfile with buildah: no daemon, and no registry needed.
#
# Usage: hack/build-image.sh [--smoke] [--oci FILE]
#   --smoke     then run `accelsched simulate --trace openb` and `accelsched demo` inside the image and check them
#   --oci FILE  also write the image as an OCI archive (e.g. for `podman load` or `skopeo copy` elsewhere)
# Environment:
#   IMAGE   the tag to build [localhost/accelsched/accelsched:<version from pyproject.toml>]
#   BASE    the Dockerfile's base. Unset: a Debian bookworm rootfs (its Python is 3.11, as python:3.11-slim's)
#           made here by mmdebstrap from the Debian mirror and imported as localhost/accelsched-base:bookworm-py3.11,
#           since python:3.11-slim cannot be pulled without a registry. Set BASE=python:3.11-slim where one is.
#   DEBIAN_MIRROR [the first Debian archive in this machine's apt sources]
#   STORAGE_DRIVER [vfs: works inside containers and VMs alike]
# Needs root on Debian/Ubuntu (buildah and mmdebstrap are installed with apt-get when missing). The base is kept in
# buildah's storage, so a second run on the same machine only rebuilds the image. The host's CA bundle is mounted
# for RUN steps only (pip behind a TLS-inspecting proxy), never copied into the image.
# Measured here (2 cores, shared with other jobs): apt-get 45 s, then base + image + --smoke 7 min 10 s from
# nothing; 4 min 30 s with the base already in storage (the image is 570 MB, the base 196 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
oci=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --oci) oci="${2:?--oci needs a file}"; shift ;;
    *) echo "build-image: unknown argument $1 (usage: hack/build-image.sh [--smoke] [--oci FILE])" >&2; exit 2 ;;
  esac
  shift
done

version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
image="${IMAGE:-localhost/accelsched/accelsched:$version}"
# The mirror apt already uses here (deb822 .sources or a one-line sources.list): no host is written into this script.
host_mirror() {
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' || true
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' || true
  } | { grep -v -- '-security' || true; } | head -1
}
mirror="${DEBIAN_MIRROR:-$(host_mirror)}"
driver="${STORAGE_DRIVER:-vfs}"
buildah=(buildah --storage-driver "$driver")
log() { echo "build-image: $*" >&2; }

need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
if [ -z "${BASE:-}" ] && ! command -v mmdebstrap >/dev/null 2>&1; then need+=(mmdebstrap); fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "needs ${need[*]} (apt-get install ${need[*]}, as root)"
    exit 1
  fi
  log "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

base="${BASE:-localhost/accelsched-base:bookworm-py3.11}"
if [ -z "${BASE:-}" ] && ! "${buildah[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  [ -n "$mirror" ] || { log "no Debian mirror in /etc/apt sources: set DEBIAN_MIRROR"; exit 1; }
  log "making the base $base from $mirror (Debian bookworm: python3 3.11, pip, CA certificates)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # EXTERNALLY-MANAGED goes: like python:3.11-slim, this base is for `pip install` into the system Python.
  mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED; rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$work/rootfs.tar" "$mirror"
  ctr="$("${buildah[@]}" from scratch)"
  "${buildah[@]}" add "$ctr" "$work/rootfs.tar" / >/dev/null
  "${buildah[@]}" config --env PATH=/usr/local/bin:/usr/bin:/bin --env LANG=C.UTF-8 --cmd python3 "$ctr"
  "${buildah[@]}" commit -q --rm "$ctr" "$base" >/dev/null
  rm -rf "$work"
  trap - EXIT
fi

mounts=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mounts=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
fi
log "building $image from Dockerfile on $base"
"${buildah[@]}" bud --quiet --isolation chroot "${mounts[@]}" --build-arg "BASE=$base" -t "$image" -f Dockerfile . >/dev/null

if [ "$smoke" = 1 ]; then
  log "smoke test: simulate --trace openb and demo in $image"
  ctr="$("${buildah[@]}" from -q "$image")"
  trap '"${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
  out="$("${buildah[@]}" run --isolation chroot "$ctr" -- sh -c \
    'cd "$(mktemp -d)" && accelsched simulate --trace openb --policy fgd --seeds 42 --jobs 1 && accelsched demo')"
  for want in "8152 pods on 1213 nodes / 6212 GPUs" "fgd" "Gangs: two training jobs" "Summary"; do
    grep -qF "$want" <<<"$out" || { log "smoke test: '$want' missing from the output"; echo "$out" >&2; exit 1; }
  done
fi
if [ -n "$oci" ]; then
  "${buildah[@]}" push -q "$image" "oci-archive:$oci:$image"
  log "wrote $oci"
fi
echo "$image"
