# bash completion for realmfs, generated from its flag sets, its -o table and
# errcode's codes by `make completions` (cmd/realmfs/distgen_test.go): do not edit.
_realmfs_options="allow_other default_permissions ro fsname= subtype= passthrough=on passthrough=off lockowner=cgroup lockowner=session lockowner=pid durability=full durability=atomic policy= audit_log= log= log_format=text log_format=json state_dir=none state_dir= nonempty debug auto_unmount max_fds_per_owner= procs= journal=on journal=off journal_dir= journal_max= journal_max_files= journal_keep= watch=on watch=off entry_timeout= attr_timeout= negative_timeout="
_realmfs_codes="PATH_ESCAPE PROTECTED_PATH_DENIED CREDENTIAL_PATH_DENIED LOCK_CONFLICT WRITE_NOT_ATOMIC SCHEMA_INVALID REALM_NOT_ACTIVE TOOL_TIMEOUT REALM_STOPPING DEVICE_NODE_DENIED WRITER_KILLED_COMMITTED WRITER_KILLED_RECOVERED RESOURCE_LIMIT XATTR_NOT_KEPT PRIVILEGE_DENIED JOURNAL_FAILED"
_realmfs() {
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion -n =: || return
	else
		words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
		cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	fi
	if ((cword > 1)); then
		case ${words[1]} in
		journal) _realmfs_journal; return ;;
		explain) _realmfs_explain; return ;;
		audit) _realmfs_audit; return ;;
		status) _realmfs_status; return ;;
		esac
	fi
	_realmfs_mount
}
_realmfs_mount() {
	case $prev in
	--audit-log)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--check-policy)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--log)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--log-format)
		COMPREPLY=($(compgen -W "text json" -- "$cur"))
		return ;;
	-o | --options)
		local pre=""
		[[ $cur == *,* ]] && pre=${cur%,*},
		COMPREPLY=($(compgen -P "$pre" -W "$_realmfs_options" -- "${cur##*,}"))
		compopt -o nospace 2>/dev/null
		return ;;
	--policy)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--state-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="--audit-log --check-policy -d --debug -f --foreground --log --log-format -o --options --policy --show-policy --state-dir -V --version -h --help"
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	if ((cword == 1)); then
		COMPREPLY=($(compgen -W "journal explain audit status" -d -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -d -- "$cur"))
}
_realmfs_journal() {
	if ((cword == 2)); then
		COMPREPLY=($(compgen -W "list diff undo" -- "$cur"))
		return
	fi
	case $prev in
	--journal-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	-o | --output)
		COMPREPLY=($(compgen -W "json" -- "$cur"))
		return ;;
	--policy)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--owner | --since)
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="--journal-dir --owner --since -h --help"
		[[ ${words[2]} == list ]] && flags+=" -o --output"
		[[ ${words[2]} == diff ]] && flags+=" --policy"
		[[ ${words[2]} == undo ]] && flags+=" --dry-run"
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -d -- "$cur"))
}
_realmfs_explain() {
	case $prev in
	-o | --output)
		COMPREPLY=($(compgen -W "json" -- "$cur"))
		return ;;
	--policy)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="-o --output --policy -h --help"
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
}
_realmfs_audit() {
	case $prev in
	--code)
		COMPREPLY=($(compgen -W "$_realmfs_codes" -- "$cur"))
		return ;;
	-o | --output)
		COMPREPLY=($(compgen -W "json" -- "$cur"))
		return ;;
	-n | --lines | --owner | --since)
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="--code -f --follow -n --lines -o --output --owner --since -h --help"
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
}
_realmfs_status() {
	case $prev in
	-o | --output)
		COMPREPLY=($(compgen -W "json" -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="-o --output -h --help"
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -d -- "$cur"))
}
complete -F _realmfs realmfs
