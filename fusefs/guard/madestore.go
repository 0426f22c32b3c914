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

// credFile is a credential's identity in the store.
type credFile struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	Gen uint64 `json:"gen"`
}

// madeStore is the store's content.
type madeStore struct {
	Version int        `json:"version"`
	Backing string     `json:"backing"` // for the reader of the file; not checked
	Files   []madeFile `json:"files"`
	// Creds: the credentials' identities (Guard.Creds), so that a hard
	// link to a key stays refused at the next mount after the key's own
	// name was removed through this one (the scan finds a credential by
	// its name only). The next mount's scan drops those it meets no file
	// of (IDs.DropUnmet).
	Creds []credFile `json:"creds,omitempty"`
}

const madeStoreVersion = 1

// LoadStore adds the entries of the store at path to g's made set and
// credentials; a missing store is an empty one.
func (g *Guard) LoadStore(path string) error {
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
	g.Made.add(st.Files)
	for _, c := range st.Creds {
		g.Creds.AddStored(ID{Key: locks.Key{Dev: c.Dev, Ino: c.Ino}, Gen: c.Gen})
	}
	return nil
}

// add adds the store's entries files to s.
func (s *MadeSet) add(files []madeFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = make(map[locks.Key]stamp)
	}
	for _, f := range files {
		s.set[locks.Key{Dev: f.Dev, Ino: f.Ino}] = stamp{gen: f.Gen, size: f.Size,
			mtim: unix.Timespec{Sec: f.Mtime[0], Nsec: f.Mtime[1]}, ctim: unix.Timespec{Sec: f.Ctime[0], Nsec: f.Ctime[1]}}
	}
}

// files is s as the store's entries.
func (s *MadeSet) files() []madeFile {
	files := []madeFile{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, m := range s.set {
		files = append(files, madeFile{Dev: k.Dev, Ino: k.Ino, Gen: m.gen, Size: m.size,
			Mtime: [2]int64{m.mtim.Sec, m.mtim.Nsec}, Ctime: [2]int64{m.ctim.Sec, m.ctim.Nsec}})
	}
	return files
}

// SaveStore writes g's made set and credentials to the store at path
// (made 0600, its directory 0700), replacing it whole. Saves are one at a
// time, so that the last one written holds everything saved before it.
func (g *Guard) SaveStore(path, backing string) error {
	g.saving.Lock()
	defer g.saving.Unlock()
	st := madeStore{Version: madeStoreVersion, Backing: backing, Files: g.Made.files()}
	for _, id := range g.Creds.All() {
		st.Creds = append(st.Creds, credFile{Dev: id.Key.Dev, Ino: id.Key.Ino, Gen: id.Gen})
	}
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
