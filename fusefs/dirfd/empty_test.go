package dirfd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEmpty: empty sees any entry but "." and "..", names like them
// included, however long and however many, and reads the directory from
// its start each time it is asked.
func TestEmpty(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		want    bool
	}{
		{"empty", nil, true},
		{"one file", []string{"f"}, false},
		{"three dots", []string{"..."}, false},
		{"dot file", []string{".x"}, false},
		{"longest name", []string{strings.Repeat("n", 255)}, false},
		{"many", manyNames(500), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, e := range tc.entries {
				if err := os.WriteFile(filepath.Join(dir, e), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			parent, err := OpenRoot(filepath.Dir(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer Close(parent)
			fd, err := openDirRead(parent, filepath.Base(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer Close(fd)
			for i := range 2 { // the first read of a fresh fd, the second rewound
				if got, err := empty(fd, i > 0); err != nil || got != tc.want {
					t.Fatalf("empty = %v, %v; want %v", got, err, tc.want)
				}
			}
		})
	}
}

func manyNames(n int) []string {
	var names []string
	for i := range n {
		names = append(names, "entry-"+strconv.Itoa(i))
	}
	return names
}

// TestOpenDirReadRefusesSymlinks: like every open of the layer, it
// follows no symlink, so a symlink to a directory is ErrEscape.
func TestOpenDirReadRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(root)
	if fd, err := openDirRead(root, "l"); err == nil {
		Close(fd)
		t.Fatal("openDirRead followed a symlink")
	}
}
