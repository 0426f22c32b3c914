package locks

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

var (
	k1 = Key{Dev: 1, Ino: 10}
	k2 = Key{Dev: 1, Ino: 20}
	k3 = Key{Dev: 2, Ino: 10} // same inode number, other device
)

// step is one operation of a table scenario. Leases are named so later steps
// can release them.
type step struct {
	op    string // "acquire", "release", "rekey"
	key   Key
	to    Key // rekey target
	owner Owner
	lease string // name of the lease to store or release
	want  errcode.Code
}

func TestTable(t *testing.T) {
	tests := []struct {
		name    string
		steps   []step
		holders map[Key]Owner // after all steps; absent keys must be free
	}{
		{
			name: "conflict between owners",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k1, owner: "b", want: errcode.LockConflict},
			},
			holders: map[Key]Owner{k1: "a"},
		},
		{
			name: "distinct keys do not conflict",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k2, owner: "b", lease: "b1"},
				{op: "acquire", key: k3, owner: "c", lease: "c1"},
			},
			holders: map[Key]Owner{k1: "a", k2: "b", k3: "c"},
		},
		{
			name: "same owner re-acquires",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k1, owner: "a", lease: "a2"},
			},
			holders: map[Key]Owner{k1: "a"},
		},
		{
			name: "double release keeps the other lease's hold",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k1, owner: "a", lease: "a2"},
				{op: "release", lease: "a1"},
				{op: "release", lease: "a1"},
				{op: "release", lease: "a1"},
				{op: "acquire", key: k1, owner: "b", want: errcode.LockConflict},
			},
			holders: map[Key]Owner{k1: "a"},
		},
		{
			name: "another owner acquires after all releases",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k1, owner: "a", lease: "a2"},
				{op: "release", lease: "a2"},
				{op: "release", lease: "a1"},
				{op: "acquire", key: k1, owner: "b", lease: "b1"},
			},
			holders: map[Key]Owner{k1: "b"},
		},
		{
			name: "stale release does not free a later holder",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "release", lease: "a1"},
				{op: "acquire", key: k1, owner: "b", lease: "b1"},
				{op: "release", lease: "a1"},
				{op: "acquire", key: k1, owner: "a", want: errcode.LockConflict},
			},
			holders: map[Key]Owner{k1: "b"},
		},
		{
			name: "rekey to a free key",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "rekey", key: k1, to: k2},
				{op: "acquire", key: k1, owner: "b", lease: "b1"},
				{op: "acquire", key: k2, owner: "b", want: errcode.LockConflict},
				{op: "acquire", key: k2, owner: "a", lease: "a2"},
			},
			holders: map[Key]Owner{k1: "b", k2: "a"},
		},
		{
			name: "rekey onto another owner's key conflicts and changes nothing",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k2, owner: "b", lease: "b1"},
				{op: "rekey", key: k1, to: k2, want: errcode.LockConflict},
			},
			holders: map[Key]Owner{k1: "a", k2: "b"},
		},
		{
			name: "rekey onto the same owner's other entry conflicts",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k2, owner: "a", lease: "a2"},
				{op: "rekey", key: k1, to: k2, want: errcode.LockConflict},
			},
			holders: map[Key]Owner{k1: "a", k2: "a"},
		},
		{
			name: "rekey of a free key or to itself is a no-op",
			steps: []step{
				{op: "rekey", key: k1, to: k2},
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "rekey", key: k1, to: k1},
			},
			holders: map[Key]Owner{k1: "a"},
		},
		{
			name: "release after rekey frees the new key",
			steps: []step{
				{op: "acquire", key: k1, owner: "a", lease: "a1"},
				{op: "acquire", key: k1, owner: "a", lease: "a2"},
				{op: "rekey", key: k1, to: k2},
				{op: "release", lease: "a1"},
				{op: "release", lease: "a2"},
				{op: "acquire", key: k2, owner: "b", lease: "b1"},
			},
			holders: map[Key]Owner{k2: "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			leases := make(map[string]*Lease)
			for i, s := range tt.steps {
				var err error
				switch s.op {
				case "acquire":
					var l *Lease
					l, err = tab.Acquire(s.key, s.owner)
					if err == nil {
						leases[s.lease] = l
					} else if l != nil {
						t.Errorf("step %d: Acquire returned a lease with error %v", i, err)
					}
				case "release":
					leases[s.lease].Release()
				case "rekey":
					err = tab.Rekey(s.key, s.to)
				}
				checkCode(t, fmt.Sprintf("step %d (%s)", i, s.op), err, s.want)
			}
			for _, k := range []Key{k1, k2, k3} {
				got, ok := tab.Holder(k)
				want, wantOK := tt.holders[k]
				if got != want || ok != wantOK {
					t.Errorf("Holder(%v) = %q, %v; want %q, %v", k, got, ok, want, wantOK)
				}
			}
			if got := tab.Len(); got != len(tt.holders) {
				t.Errorf("Len() = %d; want %d", got, len(tt.holders))
			}
			for _, l := range leases {
				l.Release()
			}
			if got := tab.Len(); got != 0 {
				t.Errorf("Len() after releasing all = %d; want 0", got)
			}
		})
	}
}

func checkCode(t *testing.T, what string, err error, want errcode.Code) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: unexpected error %v", what, err)
		}
		return
	}
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Errorf("%s: error %v; want an *errcode.Error with code %s", what, err, want)
	}
	if !errors.Is(err, &errcode.Error{Code: want}) {
		t.Errorf("%s: errors.Is(%v, %s) = false", what, err, want)
	}
}

func TestConflictNamesHolder(t *testing.T) {
	tab := NewTable()
	const holder Owner = "cgroup:/user.slice/session-3.scope"
	l, err := tab.Acquire(k1, holder)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	_, err = tab.Acquire(k1, "cgroup:/agent")
	if err == nil || !strings.Contains(err.Error(), string(holder)) {
		t.Errorf("conflict error %v does not name holder %q", err, holder)
	}
	if got := errcode.LockConflict.Errno(); got != syscall.EBUSY {
		t.Errorf("LOCK_CONFLICT errno = %v; want EBUSY", got)
	}
}

func TestSharedEntry(t *testing.T) {
	tab := NewTable()
	a1, err := tab.Acquire(k1, "a")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := tab.Acquire(k1, "a")
	if err != nil {
		t.Fatal(err)
	}
	b1, err := tab.Acquire(k2, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a1.Shared() != a2.Shared() {
		t.Error("two leases of one owner on one key have different entries")
	}
	if a1.Shared() == b1.Shared() {
		t.Error("leases on different keys share an entry")
	}
	if got := a2.Shared().Owner(); got != "a" {
		t.Errorf("Entry.Owner() = %q; want a", got)
	}

	e := a1.Shared()
	e.Lock()
	e.Value = "temp file"
	e.Unlock()

	// The entry, and its Value, survive the release of one lease and a rekey.
	a1.Release()
	if err := tab.Rekey(k1, k3); err != nil {
		t.Fatal(err)
	}
	if got := a2.Key(); got != k3 {
		t.Errorf("Key() after Rekey = %v; want %v", got, k3)
	}
	a3, err := tab.Acquire(k3, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a3.Shared() != e {
		t.Error("re-acquire after Rekey does not share the entry")
	}
	e.Lock()
	v := e.Value
	e.Unlock()
	if v != "temp file" {
		t.Errorf("Value = %v; want %q", v, "temp file")
	}
	a2.Release()
	a3.Release()
	b1.Release()

	// Once every lease is released the next hold starts a fresh entry.
	a4, err := tab.Acquire(k3, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a4.Release()
	if a4.Shared() == e || a4.Shared().Value != nil {
		t.Error("entry outlived its last lease")
	}
}

func TestReleaseNil(t *testing.T) {
	var l *Lease
	l.Release() // must not panic
}

// TestThroughNames checks that two names of one file are one lock: a hard
// link shares the inode, and a symlink is followed by stat to its target.
func TestThroughNames(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(file, hard); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym")
	if err := os.Symlink("file", sym); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		first string
		then  string
		want  errcode.Code
	}{
		{"hard link", file, hard, errcode.LockConflict},
		{"hard link reversed", hard, file, errcode.LockConflict},
		{"symlink", file, sym, errcode.LockConflict},
		{"symlink reversed", sym, file, errcode.LockConflict},
		{"symlink then hard link", sym, hard, errcode.LockConflict},
		{"other file", file, other, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			l, err := tab.Acquire(statKey(t, tt.first), "a")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			l2, err := tab.Acquire(statKey(t, tt.then), "b")
			checkCode(t, "second owner", err, tt.want)
			l2.Release()
			// The first owner reaches its own lock through any name.
			l3, err := tab.Acquire(statKey(t, tt.then), "a")
			if tt.want != "" && (err != nil || l3.Shared() != l.Shared()) {
				t.Errorf("same owner through %s: err %v, shared entry %v", tt.then, err, err == nil && l3.Shared() == l.Shared())
			}
			l3.Release()
		})
	}
}

func statKey(t *testing.T, name string) Key {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return Key{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
}

// TestStress hammers a few keys from many goroutines. Run it with -race. A
// goroutine that holds a lease must see its own owner as the holder, and the
// per-entry counter, updated under the entry's lock, must never go negative.
func TestStress(t *testing.T) {
	tab := NewTable()
	keys := []Key{k1, k2, k3}
	owners := []Owner{"a", "b", "c", "d"}
	const goroutines, rounds = 32, 2000
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds)
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			owner := owners[g%len(owners)]
			for range rounds {
				k := keys[rng.IntN(len(keys))]
				l, err := tab.Acquire(k, owner)
				if err != nil {
					if c, _ := errcode.Of(err); c != errcode.LockConflict {
						errs <- err
						return
					}
					continue
				}
				// Under the entry's lock no sibling can move the entry, and
				// other owners rekey only their own entries, so its key is
				// stable and must be held by owner.
				e := l.Shared()
				e.Lock()
				cur := l.Key()
				if h, ok := tab.Holder(cur); !ok || h != owner {
					errs <- fmt.Errorf("%s holds %v but Holder = %q, %v", owner, cur, h, ok)
				}
				n, _ := e.Value.(int)
				e.Value = n + 1
				if rng.IntN(8) == 0 {
					_ = tab.Rekey(cur, keys[rng.IntN(len(keys))])
				}
				e.Unlock()
				e.Lock()
				e.Value = e.Value.(int) - 1
				if e.Value.(int) < 0 {
					errs <- errors.New("entry counter went negative")
				}
				e.Unlock()
				l.Release()
				l.Release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := tab.Len(); n != 0 {
		t.Errorf("Len() after stress = %d; want 0", n)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	tab := NewTable()
	for b.Loop() {
		l, err := tab.Acquire(k1, "cgroup:/user.slice")
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// BenchmarkAcquireReleaseParallel is the mount's case: many handlers on
// different files at once, contending only for the table's mutex.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	tab := NewTable()
	var next sync.Mutex
	var ino uint64
	b.RunParallel(func(pb *testing.PB) {
		next.Lock()
		ino++
		k := Key{Dev: 1, Ino: ino}
		next.Unlock()
		for pb.Next() {
			l, err := tab.Acquire(k, "cgroup:/user.slice")
			if err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}

func BenchmarkConflict(b *testing.B) {
	tab := NewTable()
	l, _ := tab.Acquire(k1, "a")
	defer l.Release()
	for b.Loop() {
		if _, err := tab.Acquire(k1, "b"); err == nil {
			b.Fatal("no conflict")
		}
	}
}

func TestEntryLookup(t *testing.T) {
	tab := NewTable()
	k := Key{Dev: 1, Ino: 2}
	if _, ok := tab.Entry(k); ok {
		t.Fatal("Entry of an unheld key reported ok")
	}
	l, err := tab.Acquire(k, "a")
	if err != nil {
		t.Fatal(err)
	}
	e, ok := tab.Entry(k)
	if !ok || e != l.Shared() {
		t.Fatalf("Entry = %p, %v; want the lease's shared entry %p", e, ok, l.Shared())
	}
	l.Release()
	if _, ok := tab.Entry(k); ok {
		t.Error("Entry still reported after the last release")
	}
}

// TestAppendMode: appenders of different owners share a key; a Write of
// another owner conflicts with them and they with it; the owner appending
// alone may also write; Rekey moves every appender; a release frees only
// its own owner's entry.
func TestAppendMode(t *testing.T) {
	tb := NewTable()
	k := Key{Dev: 1, Ino: 2}
	a, err := tb.AcquireMode(k, "a", Append)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tb.AcquireMode(k, "b", Append)
	if err != nil {
		t.Fatalf("a second owner's append: %v", err)
	}
	if _, err := tb.AcquireMode(k, "c", Write); err == nil {
		t.Fatal("another owner's write beside appenders: no conflict")
	}
	if _, err := tb.AcquireMode(k, "a", Write); err == nil {
		t.Fatal("an appender's write beside another owner's append: no conflict")
	}
	if o, ok := tb.OtherHolder(k, "a"); !ok || o != "b" {
		t.Fatalf("OtherHolder(a) = %q, %v; want b", o, ok)
	}
	if e, ok := tb.EntryOf(k, "b"); !ok || e != b.Shared() || e == a.Shared() {
		t.Fatal("EntryOf(b) is not b's own entry")
	}
	n := Key{Dev: 1, Ino: 3}
	if err := tb.Rekey(k, n); err != nil {
		t.Fatal(err)
	}
	if a.Key() != n || b.Key() != n || len(tb.Entries(n)) != 2 {
		t.Fatalf("after Rekey: keys %v %v, %d entries; want both at %v", a.Key(), b.Key(), len(tb.Entries(n)), n)
	}
	b.Release()
	if _, ok := tb.OtherHolder(n, "a"); ok {
		t.Fatal("b's entry outlived its release")
	}
	w, err := tb.AcquireMode(n, "a", Write)
	if err != nil {
		t.Fatalf("the lone appender's write: %v", err)
	}
	if _, err := tb.AcquireMode(n, "b", Append); err == nil {
		t.Fatal("another owner's append beside a write: no conflict")
	}
	w.Release()
	if _, err := tb.AcquireMode(n, "b", Append); err != nil {
		t.Fatalf("an append once the write is released: %v", err)
	}
	a.Release()
	if h, ok := tb.Holder(n); !ok || h != "b" {
		t.Fatalf("Holder = %q, %v; want b", h, ok)
	}
}

type closeCount struct{ n int }

func (c *closeCount) Close() error { c.n++; return nil }

// TestPin: a pin lives as long as entries hold its key: it is closed once,
// at the last release or when the entries move (Rekey); it is refused for
// a key no entry holds, or one already pinned.
func TestPin(t *testing.T) {
	tab := NewTable()
	k, k2 := Key{1, 2}, Key{1, 3}
	var c closeCount
	if tab.Pin(k, &c) {
		t.Fatal("Pin of a key no entry holds succeeded")
	}
	a, _ := tab.AcquireMode(k, "a", Append)
	b, _ := tab.AcquireMode(k, "b", Append)
	if !tab.Pin(k, &c) {
		t.Fatal("Pin of a held key failed")
	}
	if tab.Pin(k, &closeCount{}) {
		t.Fatal("a second Pin of one key succeeded")
	}
	a.Release()
	if c.n != 0 {
		t.Fatalf("pin closed with b still holding the key")
	}
	b.Release()
	if c.n != 1 {
		t.Fatalf("pin closed %d times after the last release, want 1", c.n)
	}

	var d closeCount
	a, _ = tab.AcquireMode(k, "a", Append)
	tab.Pin(k, &d)
	if err := tab.Rekey(k, k2); err != nil {
		t.Fatal(err)
	}
	if d.n != 1 {
		t.Fatalf("pin of the old key closed %d times after Rekey, want 1", d.n)
	}
	a.Release()
	if d.n != 1 {
		t.Fatalf("pin closed again at the release: %d", d.n)
	}
}

// TestOpener: the first opener noted on an owner's entry is kept (later
// opens of the same owner share the entry and do not replace it), asked
// by key and owner; another owner, or no entry, is 0.
func TestOpener(t *testing.T) {
	tb := NewTable()
	k := Key{Dev: 1, Ino: 2}
	l1, err := tb.AcquireMode(k, "a", Append)
	if err != nil {
		t.Fatal(err)
	}
	l1.Shared().NoteOpener(100)
	l2, err := tb.AcquireMode(k, "a", Append)
	if err != nil {
		t.Fatal(err)
	}
	l2.Shared().NoteOpener(200)
	l3, err := tb.AcquireMode(k, "b", Append)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key   Key
		owner Owner
		want  uint32
	}{
		{k, "a", 100},
		{k, "b", 0},
		{k, "c", 0},
		{Key{Dev: 1, Ino: 3}, "a", 0},
	} {
		if got := tb.Opener(c.key, c.owner); got != c.want {
			t.Errorf("Opener(%v, %s) = %d, want %d", c.key, c.owner, got, c.want)
		}
	}
	l1.Release()
	l2.Release()
	l3.Release()
	if got := tb.Opener(k, "a"); got != 0 {
		t.Errorf("Opener after release = %d, want 0", got)
	}
}

// TestFileLockShared: every owner's entry of one file has one FileLock,
// which Rekey moves with them; another file's entry has its own, and so
// does a new entry of a key whose entries all went.
func TestFileLockShared(t *testing.T) {
	tab := NewTable()
	k1, k2, k3 := Key{1, 1}, Key{1, 2}, Key{1, 3}
	a, err := tab.AcquireMode(k1, "a", Append)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tab.AcquireMode(k1, "b", Append)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tab.Acquire(k2, "a")
	if err != nil {
		t.Fatal(err)
	}
	file := a.Shared().File()
	if file == nil || b.Shared().File() != file {
		t.Fatalf("two owners' entries of one file have locks %p and %p, want one", file, b.Shared().File())
	}
	if other.Shared().File() == file {
		t.Error("another file's entry shares the first file's lock")
	}
	if err := tab.Rekey(k1, k3); err != nil {
		t.Fatal(err)
	}
	c, err := tab.AcquireMode(k3, "c", Append)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shared().File() != file {
		t.Error("an entry joining the owners Rekey moved has a lock of its own")
	}
	for _, l := range []*Lease{a, b, c, other} {
		l.Release()
	}
	again, err := tab.Acquire(k3, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.Shared().File() == file {
		t.Error("a new entry of a key whose entries all went has the old one's lock")
	}
}
