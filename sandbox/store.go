package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/realm-dev/realm/errcode"
)

// Store keeps session records as files <Dir>/<id>.json. Writes are atomic
// (temp file, fsync, rename, fsync of the directory), so a crash leaves either
// the old record or the new one, never half of one.
type Store struct {
	Dir string
}

// NewStore returns the store of a state dir: its records live in
// <stateDir>/sessions.
func NewStore(stateDir string) *Store {
	return &Store{Dir: filepath.Join(stateDir, "sessions")}
}

const recordExt = ".json"

func (s *Store) path(id string) string { return filepath.Join(s.Dir, id+recordExt) }

// Save writes rec atomically.
func (s *Store) Save(rec *Record) error {
	if !ValidID(rec.ID) {
		return fmt.Errorf("save session record: invalid session id %q", rec.ID)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("save session record %s: %w", rec.ID, err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("save session record %s: %w", rec.ID, err)
	}
	if err := writeFileAtomic(s.path(rec.ID), append(data, '\n')); err != nil {
		return fmt.Errorf("save session record %s: %w", rec.ID, err)
	}
	return nil
}

// writeFileAtomic replaces name with data: temp sibling, fsync, rename,
// fsync of the directory so the rename itself survives a crash.
func writeFileAtomic(name string, data []byte) (err error) {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), name); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrNoSession is returned (wrapped) by Load for an id without a record.
var ErrNoSession = errors.New("no such session")

// Load reads the record of id. A missing record is REALM_NOT_ACTIVE wrapping
// ErrNoSession: the session is not there to be reached.
func (s *Store) Load(id string) (*Record, error) {
	if !ValidID(id) {
		return nil, errcode.Wrap(errcode.RealmNotActive, ErrNoSession, "no session %q", id)
	}
	data, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errcode.Wrap(errcode.RealmNotActive, ErrNoSession, "no session %s", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read session record %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("session record %s is corrupt: %w", id, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("session record %s names another session (%q)", id, rec.ID)
	}
	return &rec, nil
}

// Delete removes the record of id; one already gone counts as deleted. The
// directory is fsynced so the deletion survives a crash.
func (s *Store) Delete(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("delete session record: invalid session id %q", id)
	}
	err := os.Remove(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete session record %s: %w", id, err)
	}
	if d, err := os.Open(s.Dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// List returns the ids of all records, sorted, by file name alone: no record
// is parsed, so a corrupt one is listed (and can be deleted) too. An absent
// directory lists as empty.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list session records: %w", err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), recordExt)
		if ok && e.Type().IsRegular() && ValidID(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// All loads every record that parses. Corrupt ones are skipped: they belong
// to no live session, and the reaper deletes them by name.
func (s *Store) All() ([]*Record, error) {
	ids, err := s.List()
	if err != nil {
		return nil, err
	}
	var recs []*Record
	for _, id := range ids {
		rec, err := s.Load(id)
		if err != nil {
			continue
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
