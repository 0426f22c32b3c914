package sandbox

import (
	"bytes"
	"testing"
)

func TestBoundedBuffer(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []int
		wantLen   int
		truncated bool
	}{
		{"empty", 10, nil, 0, false},
		{"under", 10, []int{3, 4}, 7, false},
		{"exact", 10, []int{10}, 10, false},
		{"one over", 10, []int{11}, 10, true},
		{"split over", 10, []int{6, 6, 6}, 10, true},
		{"exact then more", 10, []int{10, 1}, 10, true},
		{"limit zero", 0, []int{1}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBoundedBuffer(tt.limit)
			var all []byte
			for i, n := range tt.writes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				all = append(all, p...)
				if got, err := b.Write(p); got != n || err != nil {
					t.Fatalf("Write(%d) = %d, %v; want %d, nil", n, got, err, n)
				}
			}
			if got := b.String(); got != string(all[:tt.wantLen]) {
				t.Errorf("kept %q, want %q", got, all[:tt.wantLen])
			}
			if b.Truncated() != tt.truncated {
				t.Errorf("Truncated() = %v, want %v", b.Truncated(), tt.truncated)
			}
		})
	}
}
