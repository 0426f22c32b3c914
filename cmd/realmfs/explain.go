package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/spf13/pflag"

	"github.com/realm-dev/realm/errcode"
	"github.com/realm-dev/realm/fusefs/journal/diff"
	"github.com/realm-dev/realm/policy"
)

const explainUsageText = `Usage: realmfs explain [--policy FILE] [-o json] PATH...

Say what the policy (--policy FILE, or the built-in one) does with each
workspace PATH (relative to BACKING's root, as the audit log writes it), and
by which rule of which source:

  credential   the guard refuses opening, reading, writing, renaming, linking
               and changing its metadata (EACCES, CREDENTIAL_PATH_DENIED); a
               stat is allowed unless credentials.hide, then it is not there
  protected    reading is allowed; making, writing, truncating, renaming
               onto, linking to and changing its metadata are refused (EACCES,
               PROTECTED_PATH_DENIED)
  coordinated  written in place and shared by every owner (SQLite's files)
  allowed      no rule names it: the mount's ordinary rules (atomic writes,
               the lock table) apply

A deny or protect glob an allow glob lifts is named too.

Exit status: 0, 2 for bad input (a bad policy file names the field and line).

Examples:
  realmfs explain .env src/main.go .git/hooks/pre-commit
  realmfs explain --policy ./realm-policy.yaml secrets/api.txt -o json

Flags:
`

// explained is one path's verdict as explain -o json writes it.
type explained struct {
	Path          string       `json:"path"`
	Verdict       string       `json:"verdict"` // credential, protected, coordinated, allowed (comma-joined)
	Credential    *policy.Rule `json:"credential,omitempty"`
	DeniedBy      *policy.Rule `json:"denied_by,omitempty"`
	Allowed       *policy.Rule `json:"allowed_by,omitempty"`
	Hidden        bool         `json:"hidden,omitempty"`
	Protected     *policy.Rule `json:"protected,omitempty"`
	ProtectedBy   *policy.Rule `json:"protected_by,omitempty"`
	ProtectExempt *policy.Rule `json:"protect_exempt_by,omitempty"`
	Coordinated   *policy.Rule `json:"coordinated,omitempty"`
}

// runExplain runs `realmfs explain` (args after "explain").
func runExplain(args []string, stdout, stderr io.Writer) int {
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "realmfs explain: "+format+" (see realmfs explain --help)\n", a...)
		return errcode.ExitUsage
	}
	flags := pflag.NewFlagSet("realmfs explain", pflag.ContinueOnError)
	var policyFile, output string
	flags.StringVar(&policyFile, "policy", "", "judge by the policy in `FILE` (default: the built-in one)")
	flags.StringVarP(&output, "output", "o", "", "`json`: one JSON object per path")
	if help, err := parseSubFlags(flags, explainUsageText, args, stdout); help || err != nil {
		if help {
			return 0
		}
		return usageErr("%v", err)
	}
	if output != "" && output != "json" {
		return usageErr("-o %q: only -o json", output)
	}
	if flags.NArg() == 0 {
		return usageErr("need a PATH to explain")
	}
	var p *policy.Policy
	if policyFile != "" {
		var err error
		if p, err = policy.Load(policyFile); err != nil {
			fmt.Fprintf(stderr, "realmfs explain: %v\n", err)
			return errcode.ExitUsage
		}
	}
	var rels []string
	for _, a := range flags.Args() {
		rel, err := workspacePath(a)
		if err != nil {
			return usageErr("%q: %v", a, err)
		}
		rels = append(rels, rel)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, rel := range rels {
		e := explainedOf(p.Explain(rel))
		if output == "json" {
			_ = enc.Encode(e)
			continue
		}
		writeExplained(stdout, e)
	}
	return 0
}

// workspacePath is arg as a workspace path: slash-separated, cleaned,
// relative to BACKING's root.
func workspacePath(arg string) (string, error) {
	if strings.HasPrefix(arg, "/") {
		return "", errors.New("give the path relative to the workspace's root, as the audit log writes it")
	}
	rel := path.Clean(arg)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errors.New("the path leaves the workspace")
	}
	if rel == "." {
		rel = ""
	}
	return rel, nil
}

func explainedOf(v policy.Verdict) explained {
	e := explained{Path: v.Path, Credential: v.Credential, DeniedBy: v.DeniedBy, Allowed: v.Allowed, Hidden: v.Hidden,
		Protected: v.Protected, ProtectedBy: v.ProtectedBy, ProtectExempt: v.ProtectExempt, Coordinated: v.Coordinated}
	var verdicts []string
	if v.Credential != nil {
		verdicts = append(verdicts, "credential")
	}
	if v.Protected != nil {
		verdicts = append(verdicts, "protected")
	}
	if v.Coordinated != nil {
		verdicts = append(verdicts, "coordinated")
	}
	if len(verdicts) == 0 {
		verdicts = append(verdicts, "allowed")
	}
	e.Verdict = strings.Join(verdicts, ",")
	if v.Credential != nil {
		e.DeniedBy = nil // the same rule
	}
	if v.Protected != nil {
		e.ProtectedBy = nil
	}
	return e
}

// writeExplained writes one path's verdict: a line, then a line for each
// rule that decides it.
func writeExplained(w io.Writer, e explained) {
	shown := diff.ShowPath(e.Path)
	if e.Path == "" {
		shown = "(the workspace root)"
	}
	fmt.Fprintf(w, "%s: %s\n", shown, e.Verdict)
	rule := func(what string, r *policy.Rule) {
		if r != nil {
			fmt.Fprintf(w, "  %s %s (%s)\n", what, r.Glob, r.Source)
		}
	}
	switch {
	case e.Credential != nil && e.Hidden:
		rule("refused and hidden (ENOENT at lookup) by deny glob", e.Credential)
	case e.Credential != nil:
		rule("open, read, write, rename, link and metadata changes refused (EACCES, CREDENTIAL_PATH_DENIED) by deny glob", e.Credential)
	case e.Allowed != nil:
		rule("would be a credential by deny glob", e.DeniedBy)
		rule("but is allowed by", e.Allowed)
	}
	if e.Protected != nil {
		rule("writes refused, reads allowed (EACCES, PROTECTED_PATH_DENIED) by protect glob", e.Protected)
	} else if e.ProtectExempt != nil {
		rule("would be protected by protect glob", e.ProtectedBy)
		rule("but is exempt by", e.ProtectExempt)
	}
	rule("written in place, shared by every owner, by coordinated glob", e.Coordinated)
}
