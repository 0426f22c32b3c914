package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestManPageCoversTheCommands: dist/man/realmctl.1 names every command of
// realmctl's tree and every flag each one takes (its long form, or its
// short one), so that the hand-written page cannot fall behind the
// commands (cobra writes the completions).
func TestManPageCoversTheCommands(t *testing.T) {
	b, err := os.ReadFile("../../dist/man/realmctl.1")
	if err != nil {
		t.Fatal(err)
	}
	// The page as text: roff's escaped dashes and font changes dropped.
	page := strings.NewReplacer(`\-`, "-", `\fB`, "", `\fR`, "", `\fI`, "", `\fP`, "").Replace(string(b))
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		if !c.IsAvailableCommand() || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		path := strings.TrimPrefix(c.CommandPath(), "realmctl ")
		if c.HasParent() && !strings.Contains(page, path) {
			t.Errorf("realmctl.1 does not name the command %q", path)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			short := f.Shorthand != "" && regexp.MustCompile(`(^|[\s\[])-`+f.Shorthand+`([\s\],]|$)`).MatchString(page)
			if !strings.Contains(page, "--"+f.Name) && !short {
				t.Errorf("realmctl.1 does not name %s's flag --%s", c.CommandPath(), f.Name)
			}
		})
		for _, s := range c.Commands() {
			visit(s)
		}
	}
	visit(newRoot(&cli{g: newGlobals(), out: &output{}}))
}
