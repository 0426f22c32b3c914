package ownerarg

import "testing"

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in, owner, start string
		pinned           bool
	}{
		{"session:7", "session:7", "", false},
		{"session:7@4242-196df20c", "session:7", "4242-196df20c", true},
		{"pid:42@17", "pid:42", "17", true},
		{"session:7@-", "session:7", "", true},
		{"undo:session:7@4242-196df20c", "undo:session:7", "4242-196df20c", true},
		{"undo:undo:pid:3@5", "undo:undo:pid:3", "5", true},
		{"cgroup:/user.slice/user@1000.service/app.slice", "cgroup:/user.slice/user@1000.service/app.slice", "", false},
		{"session:x@5", "session:x@5", "", false},
		{"session:@5", "session:@5", "", false},
	} {
		owner, start, pinned := Split(tc.in)
		if owner != tc.owner || start != tc.start || pinned != tc.pinned {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", tc.in, owner, start, pinned, tc.owner, tc.start, tc.pinned)
		}
		if pinned {
			if back := Join(owner, start); back != tc.in {
				t.Errorf("Join(%q, %q) = %q; want %q", owner, start, back, tc.in)
			}
		}
	}
}
