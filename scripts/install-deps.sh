#!/usr/bin/env bash
# install-deps.sh installs the Debian packages realm's mount, demo and tests
# use, when any is missing. Idempotent; needs root (apt-get).
#   fuse3           fusermount3 and mount.fuse3 (mounting as non-root, fstab)
#   sqlite3 git     real programs the e2e suite drives through the mount
#   vim-tiny        an editor, for the e2e tests of its two ways of saving
#   python3         the atomic-save e2e test and the benchmark's save loop
#   attr            getfattr/setfattr for the xattr e2e test
#   libcap2-bin     setcap/getcap: the file-capability plant e2e test
#   util-linux      setpriv and mount -T for the ownership and fstab tests
#   dosfstools      mkfs.vfat, for the case-insensitive BACKING e2e test
#   ntfs-3g         mkntfs and lowntfs-3g -o ignore_case: a case-insensitive
#                   BACKING through FUSE, where the kernel has no vfat
#   make gcc libc6-dev  the corpus's recursive C build (e2e/corpus_test.go)
#   python3-venv    the corpus's venv with pip, when python3 is Debian's
#   nodejs          the corpus's npm pack/install/ci; npm below if it lacks it
#   ShellCheck      the shell linter make lint runs on scripts/ (package shellcheck)
#   strace          make bench's counts of the daemon's system calls per file
set -euo pipefail
pkgs=(fuse3 sqlite3 git vim-tiny python3 attr libcap2-bin util-linux dosfstools)
pkgs+=(make gcc libc6-dev)
pkgs+=(python3-venv)
pkgs+=(nodejs)
pkgs+=(shellcheck)
pkgs+=(ntfs-3g)
pkgs+=(strace)
need=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
	if [[ $(id -u) != 0 ]]; then
		echo "install-deps: missing ${need[*]}; run as root or install them" >&2
		exit 1
	fi
	echo "install-deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian's nodejs comes without npm (NodeSource's has it): add Debian's.
if ! command -v npm >/dev/null; then
	[[ $(id -u) == 0 ]] || { echo "install-deps: npm is missing; run as root or install it" >&2; exit 1; }
	echo "install-deps: installing npm" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
# go-fuse finds fusermount3 on PATH; the kernel module must be there.
[[ -e /dev/fuse ]] || { echo "install-deps: /dev/fuse is missing (modprobe fuse)" >&2; exit 1; }
# fusectl: the watcher of a killed daemon aborts its FUSE connection
# through /sys/fs/fuse/connections/N/abort (cmd/realmfs/autounmount.go).
# systemd mounts it at boot (sys-fs-fuse-connections.mount); a machine
# booted without it has the directory empty, and a killed daemon's mount
# would leave its callers waiting.
if [[ $(id -u) == 0 && -d /sys/fs/fuse/connections ]] && ! mountpoint -q /sys/fs/fuse/connections; then
	echo "install-deps: mounting fusectl on /sys/fs/fuse/connections" >&2
	mount -t fusectl fusectl /sys/fs/fuse/connections
fi
