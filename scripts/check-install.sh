#!/usr/bin/env bash
# check-install.sh runs `make install` into a scratch DESTDIR and checks that
# every file a package needs is there, that the binaries are static and
# report the version the Makefile stamped, that the man pages render
# without warnings and the completions load.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
prefix=/usr
version=check-install-$$

make -s install DESTDIR="$dest" PREFIX="$prefix" VERSION="$version" >/dev/null

want=(
	bin/realmfs
	bin/realmctl
	share/man/man1/realmfs.1
	share/man/man1/realmctl.1
	share/man/man5/realmfs-policy.5
	share/bash-completion/completions/realmfs
	share/zsh/site-functions/_realmfs
	share/fish/vendor_completions.d/realmfs.fish
	share/bash-completion/completions/realmctl
	share/zsh/site-functions/_realmctl
	share/fish/vendor_completions.d/realmctl.fish
	lib/systemd/system/realmfs@.service
	lib/systemd/system/srv-guarded-ws.mount
)
# Outside PREFIX: logrotate reads /etc/logrotate.d only.
etc=(
	etc/logrotate.d/realmfs
)
fail=0
for f in "${want[@]}"; do
	if [[ ! -s $dest$prefix/$f ]]; then
		echo "check-install: $prefix/$f is missing or empty" >&2
		fail=1
	fi
done

for f in "${etc[@]}"; do
	if [[ ! -s $dest/$f ]]; then
		echo "check-install: /$f is missing or empty" >&2
		fail=1
	fi
done
if command -v logrotate >/dev/null && ! logrotate -d "$dest/etc/logrotate.d/realmfs" >/dev/null 2>&1; then
	echo "check-install: logrotate -d refuses etc/logrotate.d/realmfs" >&2
	fail=1
fi

for b in realmfs realmctl; do
	bin=$dest$prefix/bin/$b
	got=$("$bin" --version)
	if [[ $got != "$b $version" ]]; then
		echo "check-install: $b --version printed '$got', want '$b $version'" >&2
		fail=1
	fi
	if readelf -l "$bin" | grep -q 'Requesting program interpreter'; then
		echo "check-install: $b is dynamically linked" >&2
		fail=1
	fi
done
if ! grep -q "^ExecStart=$prefix/bin/realmfs " "$dest$prefix/lib/systemd/system/realmfs@.service"; then
	echo "check-install: realmfs@.service does not run $prefix/bin/realmfs" >&2
	fail=1
fi
if ! grep -q 'complete -o default -F __start_realmctl realmctl' "$dest$prefix/share/bash-completion/completions/realmctl"; then
	echo "check-install: the bash completion does not complete realmctl" >&2
	fail=1
fi
for c in realmfs realmctl; do
	if ! bash -c "source '$dest$prefix/share/bash-completion/completions/$c' && complete -p $c" >/dev/null 2>&1; then
		echo "check-install: the bash completion of $c does not load" >&2
		fail=1
	fi
done
if command -v man >/dev/null; then
	for p in man1/realmfs.1 man1/realmctl.1 man5/realmfs-policy.5; do
		if warn=$(MANWIDTH=80 man --warnings -l "$dest$prefix/share/man/$p" 2>&1 >/dev/null) && [[ -n $warn ]]; then
			echo "check-install: $p: $warn" >&2
			fail=1
		fi
	done
fi

# uninstall removes every file install made, and only those.
make -s uninstall DESTDIR="$dest" PREFIX="$prefix" >/dev/null
if left=$(find "$dest" -type f) && [[ -n $left ]]; then
	echo "check-install: make uninstall left: $left" >&2
	fail=1
fi
((fail == 0)) && echo "check-install: ok ($((${#want[@]} + ${#etc[@]})) files, static binaries, version $version, uninstalled)"
exit "$fail"
