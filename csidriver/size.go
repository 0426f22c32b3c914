package csidriver

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a size as Kubernetes quantities write bytes: a number,
// or one with a decimal (k, M, G, T) or binary (Ki, Mi, Gi, Ti) suffix.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, optionally with a suffix k, M, G, T, Ki, Mi, Gi or Ti", s)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}
