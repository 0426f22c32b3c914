#!/usr/bin/env bash
# podman-setup.sh prepares this machine for realmctl's Podman tests and starts
# a libpod API service for them. It is idempotent: run it as often as you like.
#
#   eval "$(bash scripts/podman-setup.sh)"        # install, configure, start
#   bash scripts/podman-setup.sh stop              # stop the service it started
#
# stop stops the service only where the setup evaluated in the same shell
# started it (REALM_PODMAN_STARTED, its pid): a run that found one already
# running (another run's, on a shared machine) leaves it to its starter.
#
# Everything it says goes to stderr; stdout carries only the `export` lines
# the caller evaluates: CONTAINERS_CONF (the podman CLI and the service must
# read the same file) and REALM_PODMAN_SOCKET (read by the e2e tests).
#
# Why each step (measured on Debian 12, podman 4.3.1, no image registry):
#   - crun refuses the hybrid cgroup layout of this machine kind: runtime = "runc".
#   - podman's default ulimits need CAP_SYS_RESOURCE, which we lack: set
#     default_ulimits from the hard limits we have (nproc at most 32768).
#   - catatonit gives containers an init that reaps orphans, so a killed
#     process tree leaves no zombie behind.
set -euo pipefail

dir=${REALM_PODMAN_DIR:-/run/realm-podman}
sock_path=${REALM_PODMAN_SOCK_PATH:-$dir/podman.sock}
socket="unix://$sock_path"
conf="$dir/containers.conf"
pidfile="$dir/service.pid"
log="$dir/service.log"

say() { printf 'podman-setup: %s\n' "$*" >&2; }

if [[ ${1:-} == stop ]]; then
	if [[ -z ${REALM_PODMAN_STARTED:-} || ! -f $pidfile || $(cat "$pidfile") != "$REALM_PODMAN_STARTED" ]]; then
		exit 0 # not ours
	fi
	if kill -0 "$(cat "$pidfile")" 2>/dev/null; then
		kill "$(cat "$pidfile")"
		say "stopped the service (pid $(cat "$pidfile"))"
	fi
	rm -f "$pidfile"
	exit 0
fi

need=()
for pkg in podman runc busybox-static catatonit fuse3 conmon; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
	say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

mkdir -p "$dir"
nofile=$(ulimit -Hn)
[[ $nofile == unlimited ]] && nofile=1048576
nproc=$(ulimit -Hu)
if [[ $nproc == unlimited ]] || ((nproc > 32768)); then nproc=32768; fi

cat >"$conf.tmp" <<CONF
# Written by scripts/podman-setup.sh; see there for why.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
CONF
mv "$conf.tmp" "$conf"
export CONTAINERS_CONF="$conf"

answers() { curl -fsS --max-time 2 --unix-socket "$sock_path" http://d/_ping >/dev/null 2>&1; }

if ! command -v curl >/dev/null; then
	answers() { podman --url "$socket" version >/dev/null 2>&1; }
fi

started=
if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && answers; then
	say "service already running (pid $(cat "$pidfile")) at $socket: left running at the end"
else
	rm -f "$sock_path"
	# setsid: the service outlives this script and the shell that ran it.
	setsid podman system service --time=0 "$socket" </dev/null >"$log" 2>&1 &
	echo $! >"$pidfile"
	for _ in $(seq 1 150); do
		answers && break
		if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
			say "the podman service exited; its log:"
			cat "$log" >&2
			exit 1
		fi
		sleep 0.2
	done
	if ! answers; then
		say "the podman service did not answer at $socket within 30s; its log:"
		cat "$log" >&2
		exit 1
	fi
	say "service running (pid $(cat "$pidfile")) at $socket"
	started=$(cat "$pidfile")
fi

printf 'export CONTAINERS_CONF=%q\n' "$conf"
printf 'export REALM_PODMAN_SOCKET=%q\n' "$socket"
printf 'export REALM_PODMAN_STARTED=%q\n' "$started"
