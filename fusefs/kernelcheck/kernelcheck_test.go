package kernelcheck

import "testing"

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		release string
		ok      bool
	}{
		{"6.18.44-fc-v857", true},
		{"6.1.0-27-amd64", true}, // Debian 12
		{"5.10.0-33-amd64", true},
		{"5.9.16", false},
		{"4.19.0-27-amd64", false},
		{"10.0", true},
		{"5.10", true},
		{"weird", true}, // unknown: let the mount tell
	} {
		err := Check(tc.release)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tc.release, err, tc.ok)
		}
	}
}
