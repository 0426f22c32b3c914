package guard

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseUmask(t *testing.T) {
	for _, tt := range []struct {
		status string
		want   uint32
	}{
		{"Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\n", 0o022},
		{"Name:\tsh\nUmask:\t0000\n", 0},
		{"Umask:\t0002", 0o002},
		{"Name:\tsh\nState:\tS\n", UmaskUnknown}, // a kernel before 4.7
		{"Umask:\t9\n", UmaskUnknown},
		{"Umask:\t7777\n", UmaskUnknown},
	} {
		if got := parseUmask([]byte(tt.status)); got != tt.want {
			t.Errorf("parseUmask(%q) = %o, want %o", tt.status, got, tt.want)
		}
	}
}

// acl encodes entries (tag, perm) as system.posix_acl_* holds them.
func acl(version uint32, entries ...[2]uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, version)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e[0])
		b = binary.LittleEndian.AppendUint16(b, e[1])
		b = binary.LittleEndian.AppendUint32(b, 1000)
	}
	return b
}

func TestACLPerm(t *testing.T) {
	const aclUser = 0x02
	for _, tt := range []struct {
		name string
		acl  []byte
		want uint32
		ok   bool
	}{
		{"minimal", acl(2, [2]uint16{aclUserObj, 7}, [2]uint16{aclGroupObj, 5}, [2]uint16{aclOther, 0}), 0o750, true},
		{"mask decides the group class", acl(2, [2]uint16{aclUserObj, 6}, [2]uint16{aclUser, 7}, [2]uint16{aclGroupObj, 7}, [2]uint16{aclMask, 5}, [2]uint16{aclOther, 4}), 0o654, true},
		{"no other entry", acl(2, [2]uint16{aclUserObj, 7}, [2]uint16{aclGroupObj, 7}), 0, false},
		{"wrong version", acl(1, [2]uint16{aclUserObj, 7}, [2]uint16{aclGroupObj, 5}, [2]uint16{aclOther, 0}), 0, false},
		{"truncated", acl(2, [2]uint16{aclUserObj, 7}, [2]uint16{aclGroupObj, 5}, [2]uint16{aclOther, 0})[:27], 0, false},
		{"empty", nil, 0, false},
	} {
		got, ok := aclPerm(tt.acl)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: aclPerm = %o, %v; want %o, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNewMode: with no default ACL on the parent the caller's umask
// applies, set-ID bits kept (the allowlist is another check's); an
// unreadable caller's umask is the strictest.
func TestNewMode(t *testing.T) {
	fd, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, tc := range []struct {
		mode, umask, want uint32
	}{
		{0o666, 0o022, 0o644},
		{0o777, 0o002, 0o775},
		{0o104777, 0o022, 0o4755}, // the type bits go, the set-user-ID bit stays
	} {
		if got := NewMode(fd, tc.mode, func() uint32 { return tc.umask }); got != tc.want {
			t.Errorf("NewMode(%#o, umask %#o) = %#o, want %#o", tc.mode, tc.umask, got, tc.want)
		}
	}
	if got := ProcUmask(1 << 30); got != UmaskUnknown {
		t.Errorf("ProcUmask of no process = %#o, want %#o", got, UmaskUnknown)
	}
}
