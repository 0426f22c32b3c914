#compdef realmfs
# zsh completion for realmfs, generated from its flag sets, its -o table and
# errcode's codes by `make completions` (cmd/realmfs/distgen_test.go): do not edit.
_realmfs_options() {
	_values -s , 'mount option' \
		'allow_other[let users other than the mounter use the mount]' \
		'default_permissions[accepted; always on]' \
		'ro[read-only mount]' \
		'fsname[name in the first column of df/mount]:NAME:' \
		'subtype[accepted for compatibility]:NAME:' \
		'passthrough[serve read-only opens by kernel FUSE passthrough]:value:(on off)' \
		'lockowner[who owns a file lock]:value:(cgroup session pid)' \
		'durability[how a close commits]:value:(full atomic)' \
		'policy[the -o form of --policy, for fstab lines and systemd .mount]:FILE:_files' \
		'audit_log[the -o form of --audit-log]:FILE:_files' \
		'log[the -o form of --log]:FILE:_files' \
		'log_format[the -o form of --log-format]:value:(text json)' \
		'state_dir[the -o form of --state-dir]:DIR|none:_directories' \
		'nonempty[mount over a non-empty directory or another mount]' \
		'debug[the -o form of -d]' \
		'auto_unmount[unmount when the daemon dies]' \
		'max_fds_per_owner[descriptors the daemon may hold for one lock owner]:N:' \
		'procs[CPUs the daemon'\''s Go code may use at once]:N:' \
		'journal[record every change made through the mount, and keep what it]:value:(on off)' \
		'journal_dir[the journal'\''s directory instead]:DIR:_directories' \
		'journal_max[bound the journal'\''s blocks]:SIZE:' \
		'journal_max_files[bound the files it holds, segments and kept versions]:N:' \
		'journal_keep[bound its records'\'' age]:DURATION:' \
		'watch[watch BACKING for changes made behind the mount and tell the]:value:(on off)' \
		'entry_timeout[how long the kernel trusts a name]:SECS:' \
		'attr_timeout[how long it trusts a file'\''s attributes]:SECS:' \
		'negative_timeout[how long it trusts that a name is absent]:SECS:'
}
if (( CURRENT > 2 )); then
	case $words[2] in
	journal)
		if (( CURRENT == 3 )); then
			_values 'journal command' list diff undo
			return
		fi
		local -a flags
		flags=(
			'--journal-dir[the journal is in DIR]:DIR:_directories'
			'--owner[only the changes of OWNER]:OWNER:'
			'--since[only the changes made at or after TIME]:TIME:'
			'(-h --help)'{-h,--help}'[print this help to standard output and exit]'
		)
		[[ $words[3] == list ]] && flags+=('(-o --output)'{-o,--output}'[json for one JSON object per change]:json:(json)')
		[[ $words[3] == diff ]] && flags+=('--policy[the mount'\''s policy FILE, whose credentials'\'' content is]:FILE:_files')
		[[ $words[3] == undo ]] && flags+=('--dry-run[list what would be undone, change nothing]')
		_arguments -s $flags '*:argument:_directories'
		return ;;
	explain)
		local -a flags
		flags=(
			'(-o --output)'{-o,--output}'[json, one JSON object per path]:json:(json)'
			'--policy[judge by the policy in FILE]:FILE:_files'
			'(-h --help)'{-h,--help}'[print this help to standard output and exit]'
		)
		_arguments -s $flags '*:argument:_files'
		return ;;
	audit)
		local -a flags
		flags=(
			'--code[only the lines of CODE]:code:(PATH_ESCAPE PROTECTED_PATH_DENIED CREDENTIAL_PATH_DENIED LOCK_CONFLICT WRITE_NOT_ATOMIC SCHEMA_INVALID REALM_NOT_ACTIVE TOOL_TIMEOUT REALM_STOPPING DEVICE_NODE_DENIED WRITER_KILLED_COMMITTED WRITER_KILLED_RECOVERED RESOURCE_LIMIT XATTR_NOT_KEPT PRIVILEGE_DENIED JOURNAL_FAILED)'
			'(-f --follow)'{-f,--follow}'[go on printing lines as they are written, until interrupted]'
			'(-n --lines)'{-n,--lines}'[print the last N lines]:N:'
			'(-o --output)'{-o,--output}'[json, the log'\''s own JSON lines]:json:(json)'
			'--owner[only the lines of lock owner OWNER]:OWNER:'
			'--since[only the lines at or after TIME]:TIME:'
			'(-h --help)'{-h,--help}'[print this help to standard output and exit]'
		)
		_arguments -s $flags '*:argument:_files'
		return ;;
	status)
		local -a flags
		flags=(
			'(-o --output)'{-o,--output}'[json, one JSON object per mount]:json:(json)'
			'(-h --help)'{-h,--help}'[print this help to standard output and exit]'
		)
		_arguments -s $flags '*:argument:_directories'
		return ;;
	esac
fi
_arguments -s \
	'--audit-log[append one JSON line per refusal to FILE]:FILE:_files' \
	'--check-policy[validate the policy in FILE and exit 0]:FILE:_files' \
	'(-d --debug)'{-d,--debug}'[log every FUSE request]' \
	'(-f --foreground)'{-f,--foreground}'[stay in the foreground]' \
	'--log[append the daemon'\''s log]:FILE:_files' \
	'--log-format[write the daemon log as text]:text:(text json)' \
	'*'{-o,--options}'[mount options, comma-separated]:options:_realmfs_options' \
	'--policy[enforce the policy in FILE]:FILE:_files' \
	'--show-policy[print the effective policy]' \
	'--state-dir[keep what the daemon remembers across mounts]:DIR:_directories' \
	'(-V --version)'{-V,--version}'[print the version and exit]' \
	'(-h --help)'{-h,--help}'[print this help to standard output and exit]' \
	'1:backing directory or command:{_alternative "commands:command:(journal explain audit status)" "dirs:directory:_directories"}' \
	'2:mountpoint:_directories'
