package errcode

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"syscall"
	"testing"
)

func TestCatalogue(t *testing.T) {
	tests := []struct {
		code  Code
		errno syscall.Errno
		exit  int
	}{
		{PathEscape, syscall.EACCES, ExitFailure},
		{CredentialPathDenied, syscall.EACCES, ExitFailure},
		{ProtectedPathDenied, syscall.EACCES, ExitFailure},
		{LockConflict, syscall.EBUSY, ExitFailure},
		{WriteNotAtomic, syscall.EIO, ExitFailure},
		{SchemaInvalid, syscall.EIO, ExitUsage},
		{RealmNotActive, syscall.EIO, ExitInactive},
		{ToolTimeout, syscall.EIO, ExitTimeout},
		{RealmStopping, syscall.EIO, ExitStopping},
		{DeviceNodeDenied, syscall.EPERM, ExitFailure},
		{PrivilegeDenied, syscall.EPERM, ExitFailure},
		{WriterKilledCommitted, syscall.EIO, ExitFailure},
		{WriterKilledRecovered, syscall.EIO, ExitFailure},
		{XattrNotKept, syscall.EIO, ExitFailure},
		{JournalFailed, syscall.EIO, ExitFailure},
		{ResourceLimit, syscall.EMFILE, ExitFailure},
	}
	for _, tt := range tests {
		if got := tt.code.Errno(); got != tt.errno {
			t.Errorf("%s.Errno() = %v, want %v", tt.code, got, tt.errno)
		}
		if got := tt.code.ExitStatus(); got != tt.exit {
			t.Errorf("%s.ExitStatus() = %d, want %d", tt.code, got, tt.exit)
		}
	}
}

func TestWrapping(t *testing.T) {
	cause := errors.New("disk on fire")
	err := fmt.Errorf("saving: %w", Wrap(WriteNotAtomic, cause, "rename %q", "f"))
	if c, ok := Of(err); !ok || c != WriteNotAtomic {
		t.Fatalf("Of = %q, %v; want WRITE_NOT_ATOMIC", c, ok)
	}
	if !errors.Is(err, cause) {
		t.Error("errors.Is(err, cause) = false")
	}
	if !errors.Is(err, &Error{Code: WriteNotAtomic}) {
		t.Error("errors.Is(err, &Error{Code: WriteNotAtomic}) = false")
	}
	if errors.Is(err, &Error{Code: LockConflict}) {
		t.Error("errors.Is matched the wrong code")
	}
	if got := ExitStatusOf(err); got != ExitFailure {
		t.Errorf("ExitStatusOf = %d", got)
	}
	if got := ExitStatusOf(New(RealmStopping, "1 survivor")); got != ExitStopping {
		t.Errorf("ExitStatusOf(REALM_STOPPING) = %d", got)
	}
	if got := ExitStatusOf(nil); got != ExitOK {
		t.Errorf("ExitStatusOf(nil) = %d", got)
	}
}

// TestCatalogueIsTheConsts: Catalogue lists every Code constant of
// errcode.go, in order, so that a new code is known to the commands that
// filter by code.
func TestCatalogueIsTheConsts(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errcode.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []Code
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				s, _ := strconv.Unquote(lit.Value)
				consts = append(consts, Code(s))
			}
		}
	}
	if fmt.Sprint(consts) != fmt.Sprint(Catalogue) {
		t.Errorf("Catalogue = %v\nthe const block has %v", Catalogue, consts)
	}
	if !Known(LockConflict) || Known("NOPE") {
		t.Error("Known disagrees with the catalogue")
	}
}
