// Command fakeopenshell stands in for NVIDIA OpenShell's openshell CLI in
// realm's tests: OpenShell needs its gateway and images, which test machines
// do not have. It implements the documented behaviour of the calls realm
// makes, and records every call, so tests can check what realm ran and in
// what order.
//
//	sandbox create --name N --policy FILE [--from IMAGE] --detach [-o json] [-- CMD...]
//	sandbox get N [-o json]
//	sandbox exec -n N [--workdir D] [--timeout S] [--no-tty] -- ARGV...
//	sandbox delete N...
//	sandbox list [-o json] [--limit N] [--offset K]
//
// As the real CLI: create refuses --output together with a trailing command
// (exit 2, a usage error); exec runs ARGV (here: locally, in its own process
// group, stdin, stdout and stderr passed through) and exits with its status,
// 128+N for a signal; exec --timeout exits 124 at the deadline and leaves the
// command running (NVIDIA/OpenShell#3159); delete of a sandbox that does not
// exist says so and exits 0; every failure of its own exits 1 with a message
// on stderr. Unlike the real CLI, create requires --name and --detach.
//
// Environment:
//
//	FAKE_OPENSHELL_LOG    file that gets one JSON line per call:
//	                      {"args":[...]} plus, for create, "policy": what the
//	                      policy file was at that moment (exists, size, sha256)
//	FAKE_OPENSHELL_STATE  directory where the sandboxes are remembered
//	FAKE_OPENSHELL_FAIL   "1": every call fails with exit 1 (gateway down)
//	FAKE_OPENSHELL_FAIL_VERB  a verb (create, get, exec, delete, list) that
//	                      fails with exit 1 while the others work
//	FAKE_OPENSHELL_LIST_CAP  largest page list returns, as a gateway may cap
//	FAKE_OPENSHELL_SHELL  words that replace an exec command's /bin/sh, e.g.
//	                      "busybox sh" to run it as in a busybox image
//
// The gateway side of create, modelled on OpenShell's gateway and podman
// driver (NVIDIA/OpenShell: crates/openshell-gateway-interceptors,
// crates/openshell-driver-podman):
//
//	FAKE_OPENSHELL_INTERCEPTOR  unix socket of a gateway interceptor bound to
//	                      openshell.v1.OpenShell/CreateSandbox: create builds
//	                      the CreateSandboxRequest the real CLI sends (as
//	                      protobuf JSON), calls the interceptor's Describe,
//	                      Evaluate(modify_operation), applies its RFC 6902
//	                      patches, and Evaluate(validate); a denial or a bad
//	                      patch fails the create (fail_closed), with the
//	                      gRPC status printed as the real CLI prints it
//	                      (interceptor.DenialMessage)
//	FAKE_OPENSHELL_ENABLE_BIND_MOUNTS  "1": the podman driver accepts bind
//	                      mounts (gateway.toml enable_bind_mounts = true);
//	                      otherwise a bind fails the create, as the driver does
//	FAKE_OPENSHELL_WORKSPACE  a host dir the operator provides at /workspace by
//	                      other means (used when no bind targets /workspace)
//
// There is no container: exec runs on this host, and the sandbox path
// /workspace in the command's words and --workdir is rewritten to the host
// dir bound there (the bind's source), or to an empty dir when nothing is,
// as an image's own empty /workspace would be. The fake does not model
// Landlock, user ids or read-only binds.
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// usageError is a command line the real CLI's parser would refuse: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func run(args []string) int {
	rec := logEntry{Args: args}
	if len(args) >= 2 && args[0] == "sandbox" && args[1] == "create" {
		rec.Policy = statPolicy(args[2:])
	}
	if err := writeLog(rec); err != nil {
		fmt.Fprintf(os.Stderr, "fakeopenshell: log: %v\n", err)
		return 1
	}
	if os.Getenv("FAKE_OPENSHELL_FAIL") == "1" {
		fmt.Fprintln(os.Stderr, "Error: failed to connect to gateway 'openshell' at https://127.0.0.1:17670 (fake: FAKE_OPENSHELL_FAIL)")
		return 1
	}
	if len(args) < 2 || args[0] != "sandbox" {
		fmt.Fprintln(os.Stderr, "error: fakeopenshell implements only `sandbox create|get|exec|delete|list`")
		return 2
	}
	verb, rest := args[1], args[2:]
	if v := os.Getenv("FAKE_OPENSHELL_FAIL_VERB"); v != "" && v == verb {
		fmt.Fprintf(os.Stderr, "Error: %s failed (fake: FAKE_OPENSHELL_FAIL_VERB)\n", verb)
		return 1
	}
	var err error
	code := 0
	switch verb {
	case "create":
		err = create(rest)
	case "get":
		err = get(rest)
	case "exec":
		code, err = execCmd(rest)
	case "delete":
		err = del(rest)
	case "list":
		err = list(rest)
	default:
		err = &usageError{fmt.Sprintf("unrecognized subcommand '%s'", verb)}
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "error: %s\n", ue.msg)
		return 2
	case err != nil:
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	return code
}

type logEntry struct {
	Args   []string    `json:"args"`
	Policy *policyStat `json:"policy,omitempty"`
}

// policyStat is what the --policy file of a create was when the create ran,
// so a test can prove the file was complete before the CLI was called.
type policyStat struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

func statPolicy(args []string) *policyStat {
	f, err := parseFlags(args, createFlags)
	if err != nil || f.values["--policy"] == "" {
		return nil
	}
	ps := &policyStat{Path: f.values["--policy"]}
	data, err := os.ReadFile(ps.Path)
	if err != nil {
		return ps
	}
	sum := sha256.Sum256(data)
	ps.Exists, ps.Size, ps.SHA256 = true, int64(len(data)), hex.EncodeToString(sum[:])
	return ps
}

func writeLog(e logEntry) error {
	name := os.Getenv("FAKE_OPENSHELL_LOG")
	if name == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// flagSpec says which flags a subcommand knows and whether each takes a
// value; short aliases map to their long name.
type flagSpec struct {
	value   map[string]bool // long flag -> takes a value
	aliases map[string]string
}

type parsed struct {
	values   map[string]string
	multi    map[string][]string // every value of a repeated flag
	bools    map[string]bool
	pos      []string // positional words before "--"
	command  []string // words after "--"
	dashdash bool
}

var createFlags = flagSpec{
	value: map[string]bool{
		"--name": true, "--from": true, "--policy": true, "--output": true,
		"--upload": true, "--cpu": true, "--memory": true, "--driver-config-json": true,
		"--provider": true, "--forward": true, "--label": true, "--env": true,
		"--approval-mode": true, "--editor": true, "--template": true,
		"--detach": false, "--no-auto-providers": false, "--auto-providers": false,
		"--tty": false, "--no-tty": false, "--keep": false, "--no-keep": false,
		"--no-git-ignore": false, "--no-credential-warnings": false,
	},
	aliases: map[string]string{"-o": "--output"},
}

var execFlags = flagSpec{
	value: map[string]bool{
		"--name": true, "--workdir": true, "--timeout": true, "--env": true,
		"--tty": false, "--no-tty": false,
	},
	aliases: map[string]string{"-n": "--name"},
}

var outputFlags = flagSpec{
	value:   map[string]bool{"--output": true, "--limit": true, "--offset": true},
	aliases: map[string]string{"-o": "--output"},
}

var noFlags = flagSpec{value: map[string]bool{}}

// parseFlags reads args as clap would for the spec: --flag VALUE,
// --flag=VALUE, boolean flags, positional words, and everything after "--"
// as the command. An unknown flag is a usage error.
func parseFlags(args []string, spec flagSpec) (*parsed, error) {
	p := &parsed{values: map[string]string{}, multi: map[string][]string{}, bools: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.dashdash = true
			p.command = args[i+1:]
			return p, nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.pos = append(p.pos, a)
			continue
		}
		flag, val, hasVal := strings.Cut(a, "=")
		if long, ok := spec.aliases[flag]; ok {
			flag = long
		}
		takes, known := spec.value[flag]
		if !known {
			return nil, &usageError{fmt.Sprintf("unexpected argument '%s' found", a)}
		}
		if !takes {
			if hasVal {
				return nil, &usageError{fmt.Sprintf("unexpected value for '%s'", flag)}
			}
			p.bools[flag] = true
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, &usageError{fmt.Sprintf("a value is required for '%s'", flag)}
			}
			i++
			val = args[i]
		}
		p.values[flag] = val
		p.multi[flag] = append(p.multi[flag], val)
	}
	return p, nil
}

// sandbox is what the fake remembers of one sandbox.
type sandbox struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Phase   string   `json:"phase"`
	Image   string   `json:"image,omitempty"`
	Policy  string   `json:"policy"`
	Command []string `json:"command,omitempty"`
	// Labels are the --label pairs.
	Labels map[string]string `json:"labels,omitempty"`
	// Workspace is the host dir the sandbox sees at /workspace.
	Workspace string `json:"workspace"`
	// Request is the CreateSandboxRequest the gateway ended up handling
	// (protobuf JSON, after the interceptor's patches).
	Request map[string]any `json:"request,omitempty"`
}

func stateDir() (string, error) {
	d := os.Getenv("FAKE_OPENSHELL_STATE")
	if d == "" {
		return "", errors.New("FAKE_OPENSHELL_STATE is not set")
	}
	return d, os.MkdirAll(d, 0o700)
}

func sandboxPath(dir, name string) string { return filepath.Join(dir, name+".json") }

func load(name string) (*sandbox, error) {
	dir, err := stateDir()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(sandboxPath(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox '%s' not found", name)
	}
	if err != nil {
		return nil, err
	}
	var sb sandbox
	if err := json.Unmarshal(data, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

func printJSON(v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", data)
	return err
}

func create(args []string) error {
	f, err := parseFlags(args, createFlags)
	if err != nil {
		return err
	}
	if _, ok := f.values["--output"]; ok && f.dashdash && len(f.command) > 0 {
		return &usageError{"the argument '--output <OUTPUT>' cannot be used with '[COMMAND]...'"}
	}
	if out, ok := f.values["--output"]; ok && out != "json" && out != "yaml" && out != "table" {
		return &usageError{fmt.Sprintf("invalid value '%s' for '--output <OUTPUT>'", out)}
	}
	name := f.values["--name"]
	if name == "" {
		return errors.New("fake: --name is required")
	}
	if !f.bools["--detach"] {
		return errors.New("fake: --detach is required (the fake cannot attach)")
	}
	pol := f.values["--policy"]
	if pol == "" {
		return errors.New("fake: --policy is required")
	}
	data, err := os.ReadFile(pol)
	if err != nil {
		return fmt.Errorf("failed to read policy file %s: %w", pol, err)
	}
	var doc struct {
		Version int `yaml:"version"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("failed to parse policy file %s: %w", pol, err)
	}
	if doc.Version != 1 {
		return fmt.Errorf("policy file %s: unsupported version %d", pol, doc.Version)
	}
	dir, err := stateDir()
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for _, l := range f.multi["--label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("invalid label format '%s', expected key=value", l)
		}
		labels[k] = v
	}
	req, err := createRequest(name, labels, f)
	if err != nil {
		return err
	}
	if req, err = gatewayIntercept(req); err != nil {
		return err
	}
	ws, err := podmanDriverWorkspace(req, dir)
	if err != nil {
		return err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	sb := sandbox{ID: "sb-" + hex.EncodeToString(id[:]), Name: name, Phase: "Ready", Image: f.values["--from"], Policy: pol, Command: f.command,
		Labels: labels, Workspace: ws, Request: req}
	js, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	// O_EXCL: a name is created once, as the gateway enforces.
	file, err := os.OpenFile(sandboxPath(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("sandbox '%s' already exists", name)
	}
	if err != nil {
		return err
	}
	if _, err := file.Write(js); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if f.values["--output"] == "json" {
		return printJSON(map[string]string{"id": sb.ID, "name": sb.Name, "phase": sb.Phase})
	}
	fmt.Printf("Created sandbox: %s\n  [0.0s] Requesting compute...\n  [0.1s] Sandbox ready\n", name)
	return nil
}

func get(args []string) error {
	f, err := parseFlags(args, outputFlags)
	if err != nil {
		return err
	}
	if len(f.pos) != 1 {
		return &usageError{"sandbox get takes one NAME"}
	}
	sb, err := load(f.pos[0])
	if err != nil {
		return err
	}
	if f.values["--output"] == "json" {
		return printJSON(map[string]any{"id": sb.ID, "name": sb.Name, "workspace": "default", "phase": sb.Phase, "labels": labelsOf(sb)})
	}
	fmt.Printf("Sandbox:\n\n  Id: %s\n  Name: %s\n  Phase: %s\n", sb.ID, sb.Name, sb.Phase)
	return nil
}

func execCmd(args []string) (int, error) {
	f, err := parseFlags(args, execFlags)
	if err != nil {
		return 0, err
	}
	argv := f.command
	if !f.dashdash {
		argv = f.pos
	}
	if len(argv) == 0 {
		return 0, &usageError{"the following required arguments were not provided: <COMMAND>..."}
	}
	name := f.values["--name"]
	if name == "" {
		return 0, errors.New("fake: -n NAME is required (the fake has no last-used sandbox)")
	}
	sb, err := load(name)
	if err != nil {
		return 0, err
	}
	if sb.Phase != "Ready" {
		return 0, fmt.Errorf("sandbox '%s' is not ready (phase: %s)", name, sb.Phase)
	}
	timeout := 0
	if s, ok := f.values["--timeout"]; ok {
		if timeout, err = strconv.Atoi(s); err != nil || timeout < 0 {
			return 0, &usageError{fmt.Sprintf("invalid value '%s' for '--timeout <TIMEOUT>'", s)}
		}
	}
	if sh := strings.Fields(os.Getenv("FAKE_OPENSHELL_SHELL")); len(sh) > 0 && argv[0] == "/bin/sh" {
		argv = append(sh, argv[1:]...)
	}
	argv = append([]string(nil), argv...)
	for i := 1; i < len(argv); i++ {
		argv[i] = inSandbox(argv[i], sb.Workspace)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = inSandbox(f.values["--workdir"], sb.Workspace)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Its own process group, as a command in a remote sandbox is out of
	// reach of a signal to the CLI's group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "exec: %v\n", err)
		return 127, nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var expire <-chan time.Time
	if timeout > 0 {
		expire = time.After(time.Duration(timeout) * time.Second)
	}
	select {
	case <-done:
	case <-expire:
		// As the real CLI: report 124 and leave the command running.
		fmt.Fprintf(os.Stderr, "Error: command timed out after %ds\n", timeout)
		return 124, nil
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return cmd.ProcessState.ExitCode(), nil
}

func del(args []string) error {
	f, err := parseFlags(args, noFlags)
	if err != nil {
		return err
	}
	if len(f.pos) == 0 {
		return &usageError{"the following required arguments were not provided: <NAME>..."}
	}
	dir, err := stateDir()
	if err != nil {
		return err
	}
	for _, name := range f.pos {
		err := os.Remove(sandboxPath(dir, name))
		switch {
		case err == nil:
			fmt.Printf("✓ Deleted sandbox %s\n", name)
		case errors.Is(err, os.ErrNotExist):
			fmt.Printf("! Sandbox %s not found\n", name)
		default:
			return err
		}
	}
	return nil
}

func list(args []string) error {
	f, err := parseFlags(args, outputFlags)
	if err != nil {
		return err
	}
	limit, offset := 100, 0
	if s, ok := f.values["--limit"]; ok {
		if limit, err = strconv.Atoi(s); err != nil || limit < 0 {
			return &usageError{fmt.Sprintf("invalid value '%s' for '--limit <LIMIT>'", s)}
		}
	}
	if s, ok := f.values["--offset"]; ok {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 {
			return &usageError{fmt.Sprintf("invalid value '%s' for '--offset <OFFSET>'", s)}
		}
	}
	if s := os.Getenv("FAKE_OPENSHELL_LIST_CAP"); s != "" {
		if c, err := strconv.Atoi(s); err == nil && c < limit {
			limit = c
		}
	}
	dir, err := stateDir()
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if offset > len(names) {
		offset = len(names)
	}
	names = names[offset:]
	if limit < len(names) {
		names = names[:limit]
	}
	out := []map[string]any{}
	for _, n := range names {
		sb, err := load(n)
		if err != nil {
			return err
		}
		out = append(out, map[string]any{"id": sb.ID, "name": sb.Name, "workspace": "default", "phase": sb.Phase, "labels": labelsOf(sb)})
	}
	if f.values["--output"] == "json" {
		return printJSON(out)
	}
	if len(out) == 0 {
		fmt.Println("No sandboxes found.")
		return nil
	}
	fmt.Println("NAME  PHASE")
	for _, o := range out {
		fmt.Printf("%s  %s\n", o["name"], o["phase"])
	}
	return nil
}
