#!/usr/bin/env bash
# check-goinstall.sh checks that `go install MODULE/cmd/realmfs@VERSION`
# works as it will for a user once the module is published: it serves this
# checkout as one version of the module from a file:// module proxy (the
# layout the Go module proxy protocol defines: @v/list, .info, .mod, .zip),
# with the real proxy behind it for the dependencies, installs both
# commands into a scratch GOBIN and checks that they report that version
# (read from the build info: `go install` sets no -ldflags).
set -euo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
version=v0.0.0-checkgoinstall
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The proxy escapes upper-case letters in module paths ("!x"); realm's has none.
if [[ $module =~ [A-Z] ]]; then
	echo "check-goinstall: module path $module needs case escaping, not done here" >&2
	exit 1
fi
dir=$work/proxy/$module/@v
mkdir -p "$dir"
echo "$version" >"$dir/list"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$dir/$version.info"
cp go.mod "$dir/$version.mod"
# The module zip: every file git tracks (or would track) under
# MODULE@VERSION/, as `go mod download` would unpack it.
git ls-files -z --cached --others --exclude-standard |
	python3 -c '
import sys, zipfile
prefix, out = sys.argv[1], sys.argv[2]
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for n in sorted(names):
        z.write(n, prefix + "/" + n)
' "$module@$version" "$dir/$version.zip"

# GOFLAGS keeps the build tags the podman bindings need without cgo (the
# README's install line says the same); GONOSUMDB, since the checksum
# database does not know this unpublished version; -trimpath as make build
# has it, so the build cache serves what make build compiled. GOFLAGS from the
# caller's environment is replaced so that -mod settings do not leak in.
# The caller's module cache serves as a second proxy (its cache/download
# has the proxy layout), so the dependencies come from the network only
# when it lacks them; the scratch GOMODCACHE keeps this version out of it.
cache=$(go env GOMODCACHE)
upstream=$(go env GOPROXY)
export GOPROXY="file://$work/proxy,file://$cache/cache/download,$upstream"
export GONOSUMDB=$module GOFLAGS="-trimpath -tags=remote,exclude_graphdriver_btrfs,containers_image_openpgp"
export GOBIN=$work/bin GOMODCACHE=$work/modcache CGO_ENABLED=0
fail=0
for c in realmfs realmctl; do
	if ! out=$(cd "$work" && go install "$module/cmd/$c@$version" 2>&1); then
		echo "check-goinstall: go install $module/cmd/$c@$version failed:" >&2
		echo "$out" >&2
		fail=1
		continue
	fi
	got=$("$GOBIN/$c" --version)
	if [[ $got != "$c $version" ]]; then
		echo "check-goinstall: $c --version printed '$got', want '$c $version'" >&2
		fail=1
	fi
done
# The module cache is read-only by design; make it removable.
chmod -R u+w "$work/modcache" 2>/dev/null || true
((fail == 0)) && echo "check-goinstall: ok (go install $module/cmd/{realmfs,realmctl}@$version)"
exit "$fail"
