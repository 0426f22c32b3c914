//go:build sqlitebench

// The SQLite benchmarks link go-sqlite3, whose C library (cgo) takes
// minutes to compile on a small machine: every e2e build would pay it,
// for two benchmarks. They build with the tag sqlitebench:
//
//	go test -tags remote,exclude_graphdriver_btrfs,containers_image_openpgp,sqlitebench ./e2e -run '^$' -bench SQLite -benchtime 300x
//
// scripts/bench.sh measures the same workloads through python3's sqlite3
// (sqlite_wal, sqlite_rollback), and the e2e suite runs SQLite itself
// (sqlite3, python3) against the mount in its tests.

package e2e

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// BenchmarkSQLiteWAL and BenchmarkSQLiteRollback measure what a committed
// SQLite transaction costs, in WAL mode and with the rollback journal
// (journal_mode=DELETE), both with synchronous=FULL: one op is one
// transaction of one INSERT of a 100-byte value, on a native directory and
// on the mount, through go-sqlite3 in this process. scripts/bench.sh's
// sqlite_wal and sqlite_rollback are the same workloads through python3.
//
//	go test ./e2e -run '^$' -bench SQLite -benchtime 300x
func BenchmarkSQLiteWAL(b *testing.B) { benchSQLite(b, "wal") }

func BenchmarkSQLiteRollback(b *testing.B) { benchSQLite(b, "delete") }

func benchSQLite(b *testing.B, journal string) {
	requireSQLite(b)
	for _, tg := range benchTargets(b) {
		name := tg.name
		if name == "mount" {
			name = "realmfs"
		}
		b.Run(name, func(b *testing.B) {
			dir, err := os.MkdirTemp(tg.dir, "sqlite-")
			if err != nil {
				b.Fatal(err)
			}
			db := openBenchDB(b, filepath.Join(dir, "bench.db"), journal)
			value := strings.Repeat("v", 100)
			for b.Loop() {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.Exec("INSERT INTO t(v) VALUES(?)", value); err != nil {
					tx.Rollback()
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// requireSQLite skips when go-sqlite3 is its stub: built without cgo
// (CGO_ENABLED=0), it opens no database.
func requireSQLite(b *testing.B) {
	db, err := sql.Open("sqlite3", ":memory:")
	if err == nil {
		err = db.Ping()
		db.Close()
	}
	if err != nil && strings.Contains(err.Error(), "CGO_ENABLED=0") {
		b.Skip("go-sqlite3 needs cgo, and this test binary was built without it:", err)
	}
	if err != nil {
		b.Fatal(err)
	}
}

// openBenchDB opens the new database path with the given journal mode and
// synchronous=FULL on every connection it makes (one: the pragmas are a
// connection's), checks both took, and creates table t. The benchmark's end
// closes it.
func openBenchDB(b *testing.B, path, journal string) *sql.DB {
	b.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode="+journal+"&_synchronous=FULL")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	var mode string
	var sync int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
		b.Fatal(err)
	}
	if mode != journal || sync != 2 {
		b.Fatalf("%s: journal_mode=%s, synchronous=%d; want %s, 2 (FULL)", path, mode, sync, journal)
	}
	if _, err := db.Exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		b.Fatal(err)
	}
	return db
}
