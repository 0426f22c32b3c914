#!/usr/bin/env bash
# build-image.sh [TAG] builds the realm-csi image (Containerfile, FROM
# scratch) from bin/realm-csi and bin/realmfs (make build; REALM_IMAGE_BIN=DIR
# takes them from DIR instead, as the e2e tests do with the static binaries
# they build) and this machine's fusermount3 with the libraries ldd names,
# with podman, offline, and runs what it holds once.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/realm-csi:latest}
bins=${REALM_IMAGE_BIN:-bin}
ctx=$(mktemp -d)
# podman, runc and the containers.conf this machine kind needs
# (scripts/podman-setup.sh says why), with a service dir of this script's
# own, so that stopping its service never stops another's.
REALM_PODMAN_DIR=$(mktemp -d)
export REALM_PODMAN_DIR
trap 'bash scripts/podman-setup.sh stop; rm -rf "$ctx" "$REALM_PODMAN_DIR"' EXIT
eval "$(bash scripts/podman-setup.sh)"

install -D -m 0755 "$bins/realm-csi" "$ctx/usr/local/bin/realm-csi"
install -D -m 0755 "$bins/realmfs" "$ctx/usr/local/bin/realmfs"
fusermount=$(command -v fusermount3)
install -D -m 4755 "$fusermount" "$ctx/usr/bin/fusermount3"
# Every library fusermount3 links, at the path the loader looks for it.
for lib in $(ldd "$fusermount" | grep -oE '/[^ ]+'); do
	install -D -m 0755 "$lib" "$ctx$lib"
done
podman build --quiet -f Containerfile -t "$tag" "$ctx"
for bin in /usr/local/bin/realm-csi /usr/local/bin/realmfs; do
	podman run --rm --entrypoint "$bin" "$tag" --version
done
podman run --rm --entrypoint /usr/bin/fusermount3 "$tag" -V
