package guard

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// insideByClean is the reference for StaysInside: the symlink lives depth
// directories below a root /r; the target stays inside when it is normal
// (no ".." after a name: cleaning it changes only "." and "//") and every
// prefix of its components, joined to the link's directory and cleaned by
// filepath.Clean, is /r or beneath it (a walk that climbs out and comes
// back, "../r/x", has left the workspace on the way).
func insideByClean(depth int, target string) bool {
	if depth < 0 || target == "" || filepath.IsAbs(target) {
		return false
	}
	if !normalByRegexp(target) {
		return false
	}
	dir := "/r" + strings.Repeat("/d", depth)
	comps := strings.Split(target, "/")
	for i := range comps {
		p := filepath.Clean(dir + "/" + strings.Join(comps[:i+1], "/"))
		if p != "/r" && !strings.HasPrefix(p, "/r/") {
			return false
		}
	}
	return true
}

// leadingUps matches a target's leading ".." components.
var leadingUps = regexp.MustCompile(`^(\.\.(/|$))*`)

// normalByRegexp is the reference for a normal target: with its "" and "."
// components dropped, no ".." follows its leading ones.
func normalByRegexp(target string) bool {
	var kept []string
	for _, c := range strings.Split(target, "/") {
		if c != "" && c != "." {
			kept = append(kept, c)
		}
	}
	rest := leadingUps.ReplaceAllString(strings.Join(kept, "/"), "")
	return !strings.Contains("/"+rest+"/", "/../")
}

// FuzzStaysInside: StaysInside agrees with the filepath.Clean reference on
// every target, and for a target it lets through, LexicalTarget names the
// path the reference reaches, relative to the root.
func FuzzStaysInside(f *testing.F) {
	for _, s := range []struct {
		depth  int
		target string
	}{
		{0, "a"}, {0, ".."}, {1, ".."}, {1, "../.."}, {2, "../x/../.."}, {0, "/etc/passwd"},
		{0, ""}, {0, "./"}, {0, "a//b/./../c"}, {1, "../../r/x"}, {3, "../../../"}, {0, "..."},
		{-1, "a"}, {2, "a/../../.."}, {0, "a/.."},
	} {
		f.Add(s.depth, s.target)
	}
	f.Fuzz(func(t *testing.T, depth int, target string) {
		if depth > 64 {
			depth %= 65 // a deep link behaves as one 64 levels down
		}
		got, want := StaysInside(depth, target), insideByClean(depth, target)
		if got != want {
			t.Fatalf("StaysInside(%d, %q) = %v, the Clean reference says %v", depth, target, got, want)
		}
		if !got {
			return
		}
		dir := strings.TrimPrefix(strings.Repeat("/d", depth), "/")
		ref := strings.TrimPrefix(strings.TrimPrefix(filepath.Clean("/r/"+dir+"/"+target), "/r"), "/")
		if lt := LexicalTarget(dir, target); lt != ref {
			t.Fatalf("LexicalTarget(%q, %q) = %q, want %q", dir, target, lt, ref)
		}
	})
}
