package main

import (
	"fmt"
	"slices"
	"strings"
)

// genBash is dist/completion/realmfs.bash.
func genBash(cmds []cmdDoc) string {
	var b strings.Builder
	b.WriteString(generatedHeader("bash"))
	fmt.Fprintf(&b, "_realmfs_options=%q\n_realmfs_codes=%q\n", strings.Join(optionWords(), " "), strings.Join(codeNames(), " "))
	var names []string
	for _, c := range cmds[1:] {
		names = append(names, c.name)
	}
	b.WriteString(`_realmfs() {
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion -n =: || return
	else
		words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
		cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	fi
	if ((cword > 1)); then
		case ${words[1]} in
`)
	for _, n := range names {
		fmt.Fprintf(&b, "\t\t%s) _realmfs_%s; return ;;\n", n, n)
	}
	b.WriteString("\t\tesac\n\tfi\n\t_realmfs_mount\n}\n")
	for _, c := range cmds {
		bashCommand(&b, c, names)
	}
	b.WriteString("complete -F _realmfs realmfs\n")
	return b.String()
}

// bashCommand writes the function that completes command c.
func bashCommand(b *strings.Builder, c cmdDoc, names []string) {
	fname := "_realmfs_" + c.name
	if c.name == "" {
		fname = "_realmfs_mount"
	}
	fmt.Fprintf(b, "%s() {\n", fname)
	if len(c.subs) > 0 {
		fmt.Fprintf(b, "\tif ((cword == 2)); then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(c.subs, " "))
	}
	b.WriteString("\tcase $prev in\n")
	var free []string
	for _, d := range c.flags {
		if d.value == "" {
			continue
		}
		pat := strings.Join(flagNames(d), " | ")
		kind, words := valueKind(d.value)
		switch kind {
		case "file":
			fmt.Fprintf(b, "\t%s)\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\t\treturn ;;\n", pat)
		case "dir":
			fmt.Fprintf(b, "\t%s)\n\t\tCOMPREPLY=($(compgen -d -- \"$cur\"))\n\t\treturn ;;\n", pat)
		case "words":
			list := fmt.Sprintf("%q", strings.Join(words, " "))
			if d.value == "CODE" {
				list = `"$_realmfs_codes"`
			}
			fmt.Fprintf(b, "\t%s)\n\t\tCOMPREPLY=($(compgen -W %s -- \"$cur\"))\n\t\treturn ;;\n", pat, list)
		case "options":
			// A comma-separated list: complete the last item, keep the rest.
			fmt.Fprintf(b, "\t%s)\n\t\tlocal pre=\"\"\n\t\t[[ $cur == *,* ]] && pre=${cur%%,*},\n"+
				"\t\tCOMPREPLY=($(compgen -P \"$pre\" -W \"$_realmfs_options\" -- \"${cur##*,}\"))\n"+
				"\t\tcompopt -o nospace 2>/dev/null\n\t\treturn ;;\n", pat)
		default:
			free = append(free, pat)
		}
	}
	if len(free) > 0 {
		fmt.Fprintf(b, "\t%s)\n\t\treturn ;;\n", strings.Join(free, " | "))
	}
	b.WriteString("\tesac\n\tif [[ $cur == -* ]]; then\n")
	fmt.Fprintf(b, "\t\tlocal flags=%q\n", strings.Join(bashFlags(c.flags, ""), " "))
	for _, sub := range c.subs {
		if only := bashFlags(c.flags, sub); len(only) > 0 {
			fmt.Fprintf(b, "\t\t[[ ${words[2]} == %s ]] && flags+=%q\n", sub, " "+strings.Join(only, " "))
		}
	}
	b.WriteString("\t\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n\t\treturn\n\tfi\n")
	compgen := "-d"
	if c.args == "files" {
		compgen = "-f"
	}
	if c.name == "" {
		fmt.Fprintf(b, "\tif ((cword == 1)); then\n\t\tCOMPREPLY=($(compgen -W %q -d -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
	}
	fmt.Fprintf(b, "\tCOMPREPLY=($(compgen %s -- \"$cur\"))\n}\n", compgen)
}

// bashFlags are the names of the flags for only ("": for every command).
func bashFlags(flags []flagDoc, only string) []string {
	var n []string
	for _, d := range flags {
		if d.only == only {
			n = append(n, flagNames(d)...)
		}
	}
	return n
}

// zshQuote makes s a description inside '…[…]'.
func zshQuote(s string) string {
	return strings.NewReplacer("'", `'\''`, "[", "(", "]", ")", ":", ",").Replace(shortDesc(s))
}

// genZsh is dist/completion/realmfs.zsh.
func genZsh(cmds []cmdDoc) string {
	var b strings.Builder
	b.WriteString("#compdef realmfs\n" + generatedHeader("zsh"))
	b.WriteString("_realmfs_options() {\n\t_values -s , 'mount option'")
	for _, d := range optionDocs() {
		spec := d.key + "[" + zshQuote(d.desc) + "]"
		lits, free := d.choices()
		switch {
		case free && slices.Contains(strings.Split(d.value, "|"), "DIR"):
			spec += ":" + d.value + ":_directories"
		case free && d.value == "FILE":
			spec += ":FILE:_files"
		case free:
			spec += ":" + d.value + ":"
		case len(lits) > 0:
			spec += ":value:(" + strings.Join(lits, " ") + ")"
		}
		fmt.Fprintf(&b, " \\\n\t\t'%s'", spec)
	}
	b.WriteString("\n}\nif (( CURRENT > 2 )); then\n\tcase $words[2] in\n")
	for _, c := range cmds[1:] {
		fmt.Fprintf(&b, "\t%s)\n", c.name)
		if len(c.subs) > 0 {
			fmt.Fprintf(&b, "\t\tif (( CURRENT == 3 )); then\n\t\t\t_values '%s command' %s\n\t\t\treturn\n\t\tfi\n", c.name, strings.Join(c.subs, " "))
		}
		b.WriteString("\t\tlocal -a flags\n\t\tflags=(\n")
		for _, d := range c.flags {
			if d.only == "" {
				fmt.Fprintf(&b, "\t\t\t%s\n", zshFlag(d))
			}
		}
		b.WriteString("\t\t)\n")
		for _, sub := range c.subs {
			for _, d := range c.flags {
				if d.only == sub {
					fmt.Fprintf(&b, "\t\t[[ $words[3] == %s ]] && flags+=(%s)\n", sub, zshFlag(d))
				}
			}
		}
		action := "_directories"
		if c.args == "files" {
			action = "_files"
		}
		fmt.Fprintf(&b, "\t\t_arguments -s $flags '*:argument:%s'\n\t\treturn ;;\n", action)
	}
	b.WriteString("\tesac\nfi\n_arguments -s \\\n")
	for _, d := range cmds[0].flags {
		fmt.Fprintf(&b, "\t%s \\\n", zshFlag(d))
	}
	var names []string
	for _, c := range cmds[1:] {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "\t'1:backing directory or command:{_alternative \"commands:command:(%s)\" \"dirs:directory:_directories\"}' \\\n", strings.Join(names, " "))
	b.WriteString("\t'2:mountpoint:_directories'\n")
	return b.String()
}

// zshFlag is d as an _arguments spec.
func zshFlag(d flagDoc) string {
	var s string
	if d.short != "" {
		excl := "'(-" + d.short + " --" + d.long + ")'"
		if valueKindOf(d) == "options" {
			excl = "'*'"
		}
		s = excl + "{-" + d.short + ",--" + d.long + "}'"
	} else {
		s = "'--" + d.long
	}
	s += "[" + zshQuote(d.usage) + "]"
	if d.value != "" {
		kind, words := valueKind(d.value)
		switch kind {
		case "file":
			s += ":FILE:_files"
		case "dir":
			s += ":DIR:_directories"
		case "words":
			s += ":" + strings.ToLower(d.value) + ":(" + strings.Join(words, " ") + ")"
		case "options":
			s += ":options:_realmfs_options"
		default:
			s += ":" + d.value + ":"
		}
	}
	return s + "'"
}

func valueKindOf(d flagDoc) string {
	k, _ := valueKind(d.value)
	return k
}

// fishQuote makes s a fish single-quoted string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// genFish is dist/completion/realmfs.fish.
func genFish(cmds []cmdDoc) string {
	var b strings.Builder
	b.WriteString(generatedHeader("fish"))
	b.WriteString("function __realmfs_options\n\tset -l pre (string match -r '^.*,' -- (commandline -ct))\n")
	fmt.Fprintf(&b, "\tfor o in %s\n\t\techo $pre$o\n\tend\nend\n", strings.Join(optionWords(), " "))
	var names []string
	for _, c := range cmds[1:] {
		names = append(names, c.name)
	}
	all := strings.Join(names, " ")
	for _, c := range cmds {
		cond := "not __fish_seen_subcommand_from " + all
		if c.name != "" {
			fmt.Fprintf(&b, "complete -c realmfs -n '__fish_use_subcommand' -a %s -d %s\n", c.name, fishQuote(c.summary))
			cond = "__fish_seen_subcommand_from " + c.name
		}
		if len(c.subs) > 0 {
			subs := strings.Join(c.subs, " ")
			fmt.Fprintf(&b, "complete -c realmfs -n '%s; and not __fish_seen_subcommand_from %s' -x -a '%s'\n", cond, subs, subs)
		}
		for _, d := range c.flags {
			fcond := cond
			if d.only != "" {
				fcond += "; and __fish_seen_subcommand_from " + d.only
			}
			fmt.Fprintf(&b, "complete -c realmfs -n '%s'%s%s -d %s\n", fcond, fishNames(d), fishValue(d), fishQuote(shortDesc(d.usage)))
		}
	}
	return b.String()
}

func fishNames(d flagDoc) string {
	s := ""
	if d.short != "" {
		s += " -s " + d.short
	}
	return s + " -l " + d.long
}

// fishValue is how d's value completes in fish.
func fishValue(d flagDoc) string {
	if d.value == "" {
		return ""
	}
	kind, words := valueKind(d.value)
	switch kind {
	case "file":
		return " -r -F"
	case "dir":
		return " -x -a '(__fish_complete_directories)'"
	case "words":
		return " -x -a '" + strings.Join(words, " ") + "'"
	case "options":
		return " -x -a '(__realmfs_options)'"
	}
	return " -x"
}
