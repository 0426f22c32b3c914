package fusefs

import (
	"syscall"
	"testing"
)

func TestAllowedModeBits(t *testing.T) {
	for _, tc := range []struct {
		typ, mode uint32
		ok        bool
	}{
		{syscall.S_IFREG, 0o755, true},
		{syscall.S_IFREG, 0o1777, true},
		{syscall.S_IFREG, 0o4755, false},
		{syscall.S_IFREG, 0o2755, false},
		{syscall.S_IFREG, 0o2645, false}, // set-group-ID without group exec
		{syscall.S_IFDIR, 0o2775, true},
		{syscall.S_IFDIR, 0o3777, true},
		{syscall.S_IFDIR, 0o4755, false},
		{syscall.S_IFIFO, 0o4644, false},
		{syscall.S_IFSOCK, 0o755, true},
	} {
		if got := tc.mode&^allowedModeBits(tc.typ) == 0; got != tc.ok {
			t.Errorf("type %#o mode %#o allowed = %v, want %v", tc.typ, tc.mode, got, tc.ok)
		}
	}
}

func TestAllowedXattr(t *testing.T) {
	for _, tc := range []struct {
		attr           string
		set, removable bool
	}{
		{"user.origin", true, true},
		{"user.xdg.origin.url", true, true},
		{"system.posix_acl_access", true, true},
		{"system.posix_acl_default", true, true},
		{"security.capability", false, true},
		{"security.selinux", false, false},
		{"security.ima", false, false},
		{"trusted.overlay.opaque", false, false},
		{"user.overlay.redirect", false, false},
		{"system.nfs4_acl", false, false},
		{"user", false, false},
		{"", false, false},
	} {
		if got := allowedXattr(tc.attr); got != tc.set {
			t.Errorf("allowedXattr(%q) = %v, want %v", tc.attr, got, tc.set)
		}
		if got := removableXattr(tc.attr); got != tc.removable {
			t.Errorf("removableXattr(%q) = %v, want %v", tc.attr, got, tc.removable)
		}
	}
}
