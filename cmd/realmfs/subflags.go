package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// parseSubFlags parses a subcommand's flags: --help prints its usage text
// and its flags on stdout (help true: the command is done, exit 0); any
// other error is the caller's usage error to word.
func parseSubFlags(flags *pflag.FlagSet, usage string, args []string, stdout io.Writer) (help bool, err error) {
	flags.SetOutput(io.Discard)
	flags.Usage = func() {
		fmt.Fprint(stdout, usage)
		flags.SetOutput(stdout)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}
