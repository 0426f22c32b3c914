package guard

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
		if got := ChmodAllowed(tc.typ, tc.mode); got != tc.ok {
			t.Errorf("type %#o mode %#o allowed = %v, want %v", tc.typ, tc.mode, got, tc.ok)
		}
	}
	if got := HostFileMode(0o6755); got != 0o755 {
		t.Errorf("HostFileMode(06755) = %#o, want 0755", got)
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
		if got := AllowedXattr(tc.attr); got != tc.set {
			t.Errorf("AllowedXattr(%q) = %v, want %v", tc.attr, got, tc.set)
		}
		if got := RemovableXattr(tc.attr); got != tc.removable {
			t.Errorf("RemovableXattr(%q) = %v, want %v", tc.attr, got, tc.removable)
		}
	}
}

// TestMetadataXattr: security.* and system.* are metadata, read of any
// file; user.* and trusted.* can hold content.
func TestMetadataXattr(t *testing.T) {
	for _, tc := range []struct {
		attr string
		want bool
	}{
		{"security.selinux", true},
		{"security.capability", true},
		{"system.posix_acl_access", true},
		{"user.origin", false},
		{"trusted.overlay.opaque", false},
		{"securityx", false},
		{"", false},
	} {
		if got := MetadataXattr(tc.attr); got != tc.want {
			t.Errorf("MetadataXattr(%q) = %v, want %v", tc.attr, got, tc.want)
		}
	}
}
