package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/realm-dev/realm/errcode"
)

// After every create, realm proves that the sandbox's /workspace is the
// guarded mount, and not an empty directory of the image or the bare
// workspace directory bound some other way:
//
//   - a canary file, .realm-canary-<nonce>, is written through the mount
//     (so it lands in the workspace directory); the sandbox must read the
//     nonce back from /workspace;
//   - a decoy, .realm-tmp-canary-<nonce>, is written straight into the
//     workspace directory. realmfs never shows names starting .realm-tmp-
//     (its own temps, swept at mount), so the sandbox must NOT see it: if it
//     does, its /workspace is the workspace directory without the guard.
//
// Both are removed when the check is over. Neither name is a credential
// glob. A sandbox that fails the check is destroyed and create fails with
// REALM_NOT_ACTIVE and the runtime's hint of what to configure.

// canaryPrefix and decoyPrefix start the two files' names. decoyPrefix must
// start with fusefs.TempPrefix (".realm-tmp-"), the names the mount hides;
// sandbox may not import fusefs, so it is spelled here.
const (
	canaryPrefix = ".realm-canary-"
	decoyPrefix  = ".realm-tmp-canary-"
)

// canaryTimeout bounds the exec that reads the canary.
const canaryTimeout = 30 * time.Second

// canaryScript runs in the sandbox with the nonce as $1. It uses only sh
// built-ins, so any image with a POSIX sh will do. Exit 3: the decoy is
// visible (unguarded); 4: no canary (not the mount at all).
const canaryScript = `c=/workspace/` + canaryPrefix + `$1
d=/workspace/` + decoyPrefix + `$1
if [ -e "$d" ]; then echo realm-canary:unguarded; exit 3; fi
IFS= read -r x <"$c" || { echo realm-canary:missing; exit 4; }
printf 'realm-canary:%s\n' "$x"
`

// WorkspaceHinter is implemented by runtimes that can say what to
// configure when /workspace is not the guarded mount.
type WorkspaceHinter interface {
	WorkspaceHint() string
}

// proveWorkspace runs the check above for sandbox id of rt, whose /workspace
// should be mount, the realmfs mount of the workspace directory backing.
func proveWorkspace(ctx context.Context, rt Runtime, id, mount, backing string) (err error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("canary nonce: %w", err)
	}
	nonce := hex.EncodeToString(b[:])
	canary := filepath.Join(mount, canaryPrefix+nonce)
	decoy := filepath.Join(backing, decoyPrefix+nonce)
	defer func() {
		for _, p := range []string{canary, decoy} {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
				err = fmt.Errorf("remove the workspace canary %s: %w", p, rerr)
			}
		}
	}()
	if err := writeNew(canary, nonce+"\n", 0o644); err != nil {
		return fmt.Errorf("write the workspace canary through the mount: %w", err)
	}
	if err := writeNew(decoy, nonce+"\n", 0o644); err != nil {
		return fmt.Errorf("write the workspace decoy: %w", err)
	}
	res, err := rt.Exec(ctx, id, ExecRequest{
		Argv:    []string{"/bin/sh", "-c", canaryScript, "realm-canary", nonce},
		Workdir: "/",
		Timeout: canaryTimeout,
	})
	if err != nil {
		return errcode.Wrap(errcode.RealmNotActive, err, "could not read the workspace canary inside the sandbox")
	}
	got := strings.TrimSpace(res.Stdout)
	if res.ExitCode == 0 && got == "realm-canary:"+nonce {
		return nil
	}
	what := "does not show the guarded mount (the canary written through it is not there)"
	if got == "realm-canary:unguarded" {
		what = "shows the workspace directory without realm's guard (a name the mount hides is visible)"
	}
	hint := "bind the realmfs mount at /workspace"
	if h, ok := rt.(WorkspaceHinter); ok {
		hint = h.WorkspaceHint()
	}
	return errcode.New(errcode.RealmNotActive, "the sandbox's /workspace %s; the session was destroyed. %s", what, hint)
}

// writeNew creates name (it must not exist) with data, and syncs it.
func writeNew(name, data string, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
