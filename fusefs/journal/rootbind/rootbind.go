// Package rootbind binds a journal kept outside BACKING to the BACKING it
// records, by a file in the journal's directory that names BACKING's root.
package rootbind

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/fusefs/dirfd"
)

// Name is the file of a journal kept outside BACKING (-o journal_dir)
// that names the BACKING it records: the inode number and birth time of
// BACKING's root directory (dirfd.Statx's generation), written at its
// first open. A journal opened for another directory is refused: a host
// process that renamed BACKING and put another directory at its path
// would otherwise have the journal's changes undone in a tree they do not
// describe. The default journal, beneath BACKING's root, is bound to it
// by where it is.
const Name = "ROOT"

// rootIdentity is the line Name holds for the directory root holds.
func rootIdentity(root int) (string, error) {
	var st unix.Stat_t
	gen, err := dirfd.Statx(root, "", &st)
	if err != nil {
		return "", fmt.Errorf("journal: BACKING: %w", err)
	}
	return fmt.Sprintf("ino %d gen %d\n", st.Ino, gen), nil
}

// Bind checks that the journal in dir records the BACKING root holds,
// and binds it to that one where it names none yet (write: a journal
// opened to record; a reader only checks).
func Bind(dir, root int, write bool) error {
	want, err := rootIdentity(root)
	if err != nil {
		return err
	}
	got, err := readSmall(dir, Name)
	switch {
	case err == nil && got != "":
		if got != want {
			return fmt.Errorf("journal: its directory records another BACKING (%s names %q; this BACKING is %q): the path given leads to another directory than the journal's (if this directory is that BACKING, restored or copied, remove %s to bind the journal to it)",
				Name, strings.TrimSpace(got), strings.TrimSpace(want), Name)
		}
		return nil
	case err != nil && !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("journal: reading %s: %w", Name, err)
	case !write:
		return nil
	}
	// Absent, or empty (a crash before its write was durable): named now.
	fd, err := dirfd.Open(dir, Name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: making %s: %w", Name, err)
	}
	f := os.NewFile(uintptr(fd), Name)
	_, err = f.WriteString(want)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: writing %s: %w", Name, err)
	}
	return nil
}

// readSmall reads the small regular file name in dir.
func readSmall(dir int, name string) (string, error) {
	fd, err := dirfd.Open(dir, name, unix.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := dirfd.Fstat(fd, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", fmt.Errorf("journal: %s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	return string(b), err
}
