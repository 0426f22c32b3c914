package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/realm-dev/realm/locks"
)

// The made set across mounts (fusefs.Options.MadeStore). A clone's fixture keys
// stay the clone's after a remount: the set of files made through the
// mount is saved when the mount ends and read when the next one starts,
// in a file of the daemon's state outside BACKING (no process on the mount
// can write it). Each entry is a file's identity and its stamp (size, mtime
// and ctime as the mount last left them), so a file the host changed or
// replaced while nothing was mounted no longer matches at its next check
// and is a host file again, as it is while mounted. The file is written
// whole (temp, fsync, rename), at unmount only: a daemon killed before
// leaves the previous set, whose entries the files made since do not
// match (fail closed: they are host-placed after the restart).

// madeFile is one entry of the store.
type madeFile struct {
	Dev   uint64   `json:"dev"`
	Ino   uint64   `json:"ino"`
	Gen   uint64   `json:"gen"`
	Size  int64    `json:"size"`
	Mtime [2]int64 `json:"mtime"`
	Ctime [2]int64 `json:"ctime"`
}

// madeStore is the store's content.
type madeStore struct {
	Version int        `json:"version"`
	Backing string     `json:"backing"` // for the reader of the file; not checked
	Files   []madeFile `json:"files"`
}

const madeStoreVersion = 1

// Load adds the entries of the store at path to s; a missing store is an
// empty one.
func (s *MadeSet) Load(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st madeStore
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Version != madeStoreVersion {
		return fmt.Errorf("%s: version %d, want %d", path, st.Version, madeStoreVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = make(map[locks.Key]stamp)
	}
	for _, f := range st.Files {
		s.set[locks.Key{Dev: f.Dev, Ino: f.Ino}] = stamp{gen: f.Gen, size: f.Size,
			mtim: unix.Timespec{Sec: f.Mtime[0], Nsec: f.Mtime[1]}, ctim: unix.Timespec{Sec: f.Ctime[0], Nsec: f.Ctime[1]}}
	}
	return nil
}

// Save writes s to the store at path (made 0600, its directory 0700),
// replacing it whole.
func (s *MadeSet) Save(path, backing string) error {
	st := madeStore{Version: madeStoreVersion, Backing: backing, Files: []madeFile{}}
	s.mu.Lock()
	for k, m := range s.set {
		st.Files = append(st.Files, madeFile{Dev: k.Dev, Ino: k.Ino, Gen: m.gen, Size: m.size,
			Mtime: [2]int64{m.mtim.Sec, m.mtim.Nsec}, Ctime: [2]int64{m.ctim.Sec, m.ctim.Nsec}})
	}
	s.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
