#!/usr/bin/env bash
# check-install.sh runs `make install` into a scratch DESTDIR and checks that
# every file a package needs is there, and that the installed realmctl
# reports the version the Makefile stamped.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
prefix=/usr/local
version=check-install-$$

make -s install DESTDIR="$dest" PREFIX="$prefix" VERSION="$version" >/dev/null

want=(
	bin/realmfs
	bin/realmctl
	share/man/man1/realmctl.1
	share/bash-completion/completions/realmctl
	share/zsh/site-functions/_realmctl
	share/fish/vendor_completions.d/realmctl.fish
)
fail=0
for f in "${want[@]}"; do
	if [[ ! -s $dest$prefix/$f ]]; then
		echo "check-install: $prefix/$f is missing or empty" >&2
		fail=1
	fi
done

got=$("$dest$prefix/bin/realmctl" --version)
if [[ $got != "realmctl $version" ]]; then
	echo "check-install: realmctl --version printed '$got', want 'realmctl $version'" >&2
	fail=1
fi
got=$("$dest$prefix/bin/realmfs" --version)
if [[ $got != "realmfs $version" ]]; then
	echo "check-install: realmfs --version printed '$got', want 'realmfs $version'" >&2
	fail=1
fi
if ! grep -q 'complete -o default -F __start_realmctl realmctl' "$dest$prefix/share/bash-completion/completions/realmctl"; then
	echo "check-install: the bash completion does not complete realmctl" >&2
	fail=1
fi
if command -v man >/dev/null && ! MANPATH="$dest$prefix/share/man" man -w realmctl >/dev/null 2>&1; then
	echo "check-install: man cannot find realmctl(1)" >&2
	fail=1
fi
((fail == 0)) && echo "check-install: ok (${#want[@]} files, version $version)"
exit "$fail"
