// Package layering holds no code: its test keeps realm's packages in
// layers, so that a request runs one way through them (the go-fuse
// adapters above the write engine and the guard's services, above the
// layers they use: dirfd, the lock table, /proc), and keeps the import
// graph in docs/ARCHITECTURE.md the one the compiler sees.
package layering
