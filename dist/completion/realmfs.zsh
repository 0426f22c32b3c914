#compdef realmfs
# zsh completion for realmfs
if [[ $words[2] == journal ]]; then
	if (( CURRENT == 3 )); then
		_values 'journal command' 'list[one line per change]' 'diff[each path before the window against BACKING now]' 'undo[put an owner'\''s changes back]'
		return
	fi
	local -a journal_flags
	journal_flags=(
		'--owner[only the changes of OWNER]:owner:'
		'--since[only changes at or after TIME (RFC3339, or 10m)]:time:'
		'--journal-dir[the journal is in DIR]:directory:_directories'
		'(-h --help)'{-h,--help}'[show help]'
	)
	[[ $words[3] == list ]] && journal_flags+=('(-o --output)'{-o,--output}'[output format]:format:(json)')
	[[ $words[3] == undo ]] && journal_flags+=('--dry-run[list what would be undone]')
	_arguments -s $journal_flags '*:target (mountpoint or BACKING):_directories'
	return
fi
_arguments -s \
	'(-f --foreground)'{-f,--foreground}'[stay in the foreground]' \
	'*'{-o,--options}'[mount options]:options:(allow_other ro fsname= passthrough=on passthrough=off lockowner=cgroup lockowner=session lockowner=pid durability=full durability=atomic entry_timeout= attr_timeout= negative_timeout= watch=on watch=off policy= audit_log= log= log_format=text log_format=json state_dir= nonempty)' \
	'--policy[enforce the policy in FILE]:policy file:_files' \
	'--check-policy[validate FILE and exit]:policy file:_files' \
	'--show-policy[print the effective policy]::policy file:_files' \
	'--audit-log[append one JSON line per refusal]:file:_files' \
	'--log[append the daemon log]:file:_files' \
	'--log-format[daemon log format]:format:(text json)' \
	'--state-dir[what the daemon remembers across mounts]:directory:_directories' \
	'(-d --debug)'{-d,--debug}'[log every FUSE request]' \
	'(-V --version)'{-V,--version}'[print the version]' \
	'1:backing directory (or journal):_directories' \
	'2:mountpoint:_directories'
