package sandbox

import (
	"strconv"
	"strings"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/sandbox/label"
)

// openShellForbidden are the CLI flags realm never passes. Each would let a
// sandbox escape what realm and the operator decided:
//
//   - --env puts values into the sandbox's environment (credentials leak
//     this way);
//   - --provider and --auto-providers attach credential providers;
//   - --driver-config-json hands the compute driver raw settings, host bind
//     mounts included;
//   - --forward and --expose open host ports into the sandbox;
//   - --template swaps in a sandbox template the policy did not see.
var openShellForbidden = []string{
	"--env",
	"--provider",
	"--driver-config-json",
	"--forward",
	"--expose",
	"--template",
	"--auto-providers",
}

// openShellCall is one CLI call the runtime makes. buildOpenShellArgv is the
// only place that turns one into an argv, so the guard sees every argv.
type openShellCall struct {
	verb    string   // create, get, exec, delete, list
	name    string   // sandbox name (create, get, exec, delete)
	session string   // realm's session id, labelled on the sandbox (create)
	state   string   // the state dir's label.StateID, labelled on the sandbox (create); "" none
	policy  string   // policy document path (create)
	image   string   // --from (create); empty: the gateway's default image
	workdir string   // --workdir (exec); empty: the sandbox's default
	limit   int      // --limit (list)
	offset  int      // --offset (list)
	command []string // after "--": the workload (create), the command (exec)
}

// buildOpenShellArgv returns the argv of c, bin first:
//
//	bin sandbox create --name NAME --policy FILE --label io.realm.managed=true --label io.realm.session=ID [--label io.realm.state=STATE] [--from IMAGE] --detach --no-auto-providers -- WORKLOAD...
//	bin sandbox get NAME -o json
//	bin sandbox exec -n NAME --no-tty [--workdir DIR] -- COMMAND...
//	bin sandbox delete NAME
//	bin sandbox list -o json --limit N --offset K
//
// --no-auto-providers keeps the CLI from creating credential providers from
// realmctl's environment; --no-tty keeps stdout and stderr apart. The
// labels are what realm's gateway interceptor (realmctl
// openshell-interceptor) recognises realm's sandboxes by. No value
// may start with "-", so no value can be taken for a flag and the first "--"
// is always the separator. The result passes checkOpenShellArgv or is not
// returned.
func buildOpenShellArgv(bin string, c openShellCall) ([]string, error) {
	if bin == "" {
		return nil, errcode.New(errcode.RealmNotActive, "openshell: no CLI path")
	}
	for _, v := range []string{c.name, c.policy, c.image, c.workdir} {
		if strings.HasPrefix(v, "-") {
			return nil, errcode.New(errcode.SchemaInvalid, "openshell: argument %q may not start with '-'", v)
		}
	}
	needName := func() error {
		if !validSandboxName(c.name) {
			return errcode.New(errcode.SchemaInvalid, "openshell: %q is not a valid sandbox name", c.name)
		}
		return nil
	}
	argv := []string{bin, "sandbox", c.verb}
	switch c.verb {
	case "create":
		if err := needName(); err != nil {
			return nil, err
		}
		if c.policy == "" || len(c.command) == 0 {
			return nil, errcode.New(errcode.SchemaInvalid, "openshell: create needs a policy document and a workload")
		}
		if !ValidID(c.session) {
			return nil, errcode.New(errcode.SchemaInvalid, "openshell: create needs realm's session id, not %q", c.session)
		}
		argv = append(argv, "--name", c.name, "--policy", c.policy,
			"--label", label.Managed+"=true", "--label", label.Session+"="+c.session)
		if c.state != "" {
			if !label.ValidStateID(c.state) {
				return nil, errcode.New(errcode.SchemaInvalid, "openshell: %q is not a state dir id", c.state)
			}
			argv = append(argv, "--label", label.State+"="+c.state)
		}
		if c.image != "" {
			argv = append(argv, "--from", c.image)
		}
		argv = append(argv, "--detach", "--no-auto-providers", "--")
		argv = append(argv, c.command...)
	case "get":
		if err := needName(); err != nil {
			return nil, err
		}
		argv = append(argv, c.name, "-o", "json")
	case "exec":
		if err := needName(); err != nil {
			return nil, err
		}
		if len(c.command) == 0 {
			return nil, errcode.New(errcode.SchemaInvalid, "openshell: exec needs a command")
		}
		argv = append(argv, "-n", c.name, "--no-tty")
		if c.workdir != "" {
			argv = append(argv, "--workdir", c.workdir)
		}
		argv = append(argv, "--")
		argv = append(argv, c.command...)
	case "delete":
		if err := needName(); err != nil {
			return nil, err
		}
		argv = append(argv, c.name)
	case "list":
		argv = append(argv, "-o", "json", "--limit", strconv.Itoa(c.limit), "--offset", strconv.Itoa(c.offset))
	default:
		return nil, errcode.New(errcode.SchemaInvalid, "openshell: unknown call %q", c.verb)
	}
	if err := checkOpenShellArgv(argv); err != nil {
		return nil, err
	}
	return argv, nil
}

// checkOpenShellArgv refuses an argv that carries a forbidden flag, alone
// ("--env") or with its value attached ("--env=K=V"), among the CLI's own
// arguments: argv[1] up to the first "--". What follows "--" is the argv of
// the command run inside the sandbox; the CLI takes it as positional words,
// never as its flags, and a command such as `git commit --template F` must
// stay possible.
func checkOpenShellArgv(argv []string) error {
	for i, a := range argv {
		if i == 0 {
			continue
		}
		if a == "--" {
			return nil
		}
		for _, f := range openShellForbidden {
			if a == f || strings.HasPrefix(a, f+"=") {
				return errcode.New(errcode.SchemaInvalid, "openshell: refusing to pass %s to the CLI", f)
			}
		}
	}
	return nil
}

// validSandboxName reports whether s is a DNS-1123 label, as OpenShell wants
// sandbox names: 1-63 lower-case letters, digits and '-', starting and ending
// with a letter or digit.
func validSandboxName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
