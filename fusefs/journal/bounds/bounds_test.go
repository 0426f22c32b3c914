package bounds

import "testing"

func TestOverAndSlackened(t *testing.T) {
	tests := []struct {
		name         string
		b            Bounds
		bytes, files int64
		over, slack  bool
	}{
		{"no bounds", Bounds{}, 1 << 50, 1 << 40, false, false},
		{"within", Bounds{MaxBytes: 100, MaxFiles: 10}, 100, 10, false, false},
		{"bytes past, within the slack", Bounds{MaxBytes: 100}, 150, 1 << 40, true, false},
		{"bytes past the slack", Bounds{MaxBytes: 100}, 151, 0, true, true},
		{"files past, within the slack", Bounds{MaxFiles: 10}, 1 << 50, 15, true, false},
		{"files past the slack", Bounds{MaxBytes: 100, MaxFiles: 10}, 0, 16, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Over(tc.bytes, tc.files); got != tc.over {
				t.Errorf("Over(%d, %d) = %v, want %v", tc.bytes, tc.files, got, tc.over)
			}
			if got := tc.b.Slackened().Over(tc.bytes, tc.files); got != tc.slack {
				t.Errorf("Slackened().Over(%d, %d) = %v, want %v", tc.bytes, tc.files, got, tc.slack)
			}
		})
	}
}
