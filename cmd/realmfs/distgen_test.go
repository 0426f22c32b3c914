package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

// The shell completions and the flag and option parts of the man page are
// made from what the code already has, so that they cannot fall behind
// it: each command's flag set (as its --help prints it: the flags pflag
// knows), the -o table of the help (optionsText, which the parser is
// tested against: TestOptionDocsMatchParser) and errcode's catalogue.
// TestDistFiles fails when the committed files differ from what this
// gives; `make completions` (go test -run TestDistFiles -update) writes
// them.

var updateDist = flag.Bool("update", false, "write dist/completion/realmfs.* and the generated parts of dist/man/realmfs.1")

// flagDoc is one flag as a command's --help prints it.
type flagDoc struct {
	short, long string
	value       string // the value's name ("" for a bool flag)
	usage       string
	only        string // journal: the one command the flag is for ("list: …")
}

// cmdDoc is one of realmfs's commands: "" is the mount.
type cmdDoc struct {
	name, summary string
	subs          []string // journal's list, diff, undo
	args          string   // what its arguments are: "dirs" or "files"
	flags         []flagDoc
}

// distCommands are realmfs's commands with the flags their --help lists.
func distCommands(t *testing.T) []cmdDoc {
	cmds := []cmdDoc{
		{name: "", args: "dirs"},
		{name: "journal", summary: "list, diff or undo the changes made through a mount", subs: []string{"list", "diff", "undo"}, args: "dirs"},
		{name: "explain", summary: "what the policy does with a workspace path, and by which rule", args: "files"},
		{name: "audit", summary: "a mount's refusals, as a table", args: "files"},
		{name: "status", summary: "what each realmfs mount holds now, as its daemon tells it", args: "dirs"},
	}
	for i := range cmds {
		args := []string{"--help"}
		if cmds[i].name != "" {
			args = []string{cmds[i].name, "--help"}
		}
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("realmfs %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		cmds[i].flags = parseFlagHelp(out.String())
		if len(cmds[i].flags) == 0 {
			t.Fatalf("realmfs %s printed no flags:\n%s", strings.Join(args, " "), out.String())
		}
	}
	return cmds
}

// parseFlagHelp reads the flags pflag's PrintDefaults printed after the
// help's "Flags:" line, up to the first blank line, and adds -h.
func parseFlagHelp(help string) []flagDoc {
	_, after, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		return nil
	}
	var docs []flagDoc
	for _, line := range strings.Split(after, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		spec, usage, _ := strings.Cut(line, "   ")
		var d flagDoc
		for _, w := range strings.Fields(strings.ReplaceAll(spec, ",", "")) {
			switch {
			case strings.HasPrefix(w, "--"):
				d.long = w[2:]
			case strings.HasPrefix(w, "-"):
				d.short = w[1:]
			default:
				d.value = w
			}
		}
		d.usage = strings.TrimSpace(usage)
		if i := strings.Index(d.usage, " (default "); i > 0 && strings.HasSuffix(d.usage, ")") {
			d.usage = d.usage[:i]
		}
		for _, sub := range []string{"list", "diff", "undo"} {
			if rest, ok := strings.CutPrefix(d.usage, sub+": "); ok {
				d.only, d.usage = sub, rest
			}
		}
		docs = append(docs, d)
	}
	return append(docs, flagDoc{short: "h", long: "help", usage: "print this help to standard output and exit"})
}

// valueKind is how a flag's value completes, by the value's name: files,
// directories, a list of words, the mount options, or free text ("").
func valueKind(value string) (kind string, words []string) {
	switch value {
	case "FILE":
		return "file", nil
	case "DIR":
		return "dir", nil
	case "CODE":
		return "words", codeNames()
	case "json":
		return "words", []string{"json"}
	case "text":
		return "words", []string{"text", "json"}
	case "strings":
		return "options", nil
	}
	return "", nil
}

func codeNames() []string {
	names := make([]string, len(errcode.Catalogue))
	for i, c := range errcode.Catalogue {
		names[i] = string(c)
	}
	return names
}

// optionWords are the -o completions: each option, with each of its
// literal values, or with "=" for a value of the user's.
func optionWords() []string {
	var words []string
	for _, d := range optionDocs() {
		if d.value == "" {
			words = append(words, d.key)
			continue
		}
		lits, free := d.choices()
		for _, l := range lits {
			words = append(words, d.key+"="+l)
		}
		if free {
			words = append(words, d.key+"=")
		}
	}
	return words
}

// shortDesc is the head of a usage, for the one-line descriptions of zsh
// and fish: up to its first "; ", " (" or ": " that leaves enough to say
// something, else its first words up to about 60 characters.
func shortDesc(s string) string {
	const enough, most = 15, 60
	cut := len(s)
	for _, sep := range []string{"; ", " (", ": "} {
		if i := strings.Index(s[min(enough, len(s)):], sep); i >= 0 && enough+i < cut {
			cut = enough + i
		}
	}
	s = s[:cut]
	for len(s) > most {
		i := strings.LastIndexByte(s, ' ')
		if i < 0 {
			break
		}
		s = strings.TrimRight(s[:i], ",")
	}
	return strings.TrimSpace(s)
}

// flagNames are -s and --long of d, as typed.
func flagNames(d flagDoc) []string {
	var n []string
	if d.short != "" {
		n = append(n, "-"+d.short)
	}
	return append(n, "--"+d.long)
}

// TestDistFiles: the committed completions and the man page's generated
// parts are what the code gives; -update writes them.
func TestDistFiles(t *testing.T) {
	cmds := distCommands(t)
	dist := filepath.Join("..", "..", "dist")
	manPath := filepath.Join(dist, "man", "realmfs.1")
	man, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatal(err)
	}
	genMan, err := genManParts(string(man), cmds)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(dist, "completion", "realmfs.bash"): genBash(cmds),
		filepath.Join(dist, "completion", "realmfs.zsh"):  genZsh(cmds),
		filepath.Join(dist, "completion", "realmfs.fish"): genFish(cmds),
		manPath: genMan,
	}
	for path, want := range files {
		if *updateDist {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not what the flag sets and the -o table give: run make completions", path)
		}
	}
}

// generatedHeader is the first comment of a generated completion file.
func generatedHeader(shell string) string {
	return fmt.Sprintf("# %s completion for realmfs, generated from its flag sets, its -o table and\n"+
		"# errcode's codes by `make completions` (cmd/realmfs/distgen_test.go): do not edit.\n", shell)
}
