package dirfd

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWalkParent: a workspace path's parent is reached one name at a
// time, and no path leaves the root or follows a link on the way.
func TestWalkParent(t *testing.T) {
	root, _ := tree(t)
	rfd := openRoot(t, root)
	for _, tt := range []struct {
		rel     string
		name    string // the last name returned, where the walk succeeds
		wantErr error  // nil: must succeed; ErrEscape: must be refused
	}{
		{"a/b/file", "file", nil},
		{"a/b/absent", "absent", nil}, // the last name need not exist
		{"top", "top", nil},
		{"link-out", "link-out", nil}, // the last name is not resolved
		{"", "", ErrEscape},
		{"..", "", ErrEscape},
		{"a//b", "", ErrEscape},
		{"a/./b/file", "", ErrEscape},
		{"/etc/passwd", "", ErrEscape},
		{"a/../../outside/secret", "", ErrEscape},
		{"link-out/secret", "", ErrEscape},
		{"chain1/secret", "", ErrEscape},
		{"abs/passwd", "", ErrEscape},
		{"a/up/outside/secret", "", ErrEscape},
		{"nonexistent/x", "", unix.ENOENT},
		{"a/b/file/x", "", unix.ENOTDIR},
	} {
		bothWays(t, func(t *testing.T) {
			dir, name, err := WalkParent(rfd, tt.rel)
			switch {
			case err == nil:
				defer Close(dir)
				var st unix.Stat_t
				if tt.wantErr != nil {
					t.Errorf("%q: walked to %q, want %v", tt.rel, name, tt.wantErr)
				} else if name != tt.name {
					t.Errorf("%q: last name %q, want %q", tt.rel, name, tt.name)
				} else if tt.name == "file" && Lstat(dir, name, &st) != nil {
					t.Errorf("%q: the parent returned does not hold %q", tt.rel, name)
				}
			case tt.wantErr == nil:
				t.Errorf("%q: %v", tt.rel, err)
			case tt.wantErr == ErrEscape && !refused(err):
				t.Errorf("%q = %v, want ErrEscape", tt.rel, err)
			case tt.wantErr != ErrEscape && !errors.Is(err, tt.wantErr):
				t.Errorf("%q = %v, want %v", tt.rel, err, tt.wantErr)
			}
		})
	}
}
