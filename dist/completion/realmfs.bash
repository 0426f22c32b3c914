# bash completion for realmfs
_realmfs() {
	local cur prev
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	if [[ ${COMP_WORDS[1]} == journal ]]; then
		_realmfs_journal
		return
	fi
	case $prev in
	--policy | --check-policy | --show-policy | --audit-log | --log)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--state-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	--log-format)
		COMPREPLY=($(compgen -W "text json" -- "$cur"))
		return ;;
	-o | --options)
		COMPREPLY=($(compgen -W "allow_other ro fsname= passthrough=on passthrough=off lockowner=cgroup lockowner=session lockowner=pid durability=full durability=atomic entry_timeout= attr_timeout= negative_timeout= watch=on watch=off policy= audit_log= log= log_format=text log_format=json state_dir= nonempty" -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "-f --foreground -o --options --policy --check-policy --show-policy --audit-log --log --log-format --state-dir -d --debug -V --version -h --help" -- "$cur"))
		return
	fi
	if ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W "journal explain status" -d -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -d -- "$cur"))
}
# realmfs journal list|diff|undo TARGET [--owner O] [--since T] [-o json] [--dry-run] [--journal-dir DIR]
_realmfs_journal() {
	if ((COMP_CWORD == 2)); then
		COMPREPLY=($(compgen -W "list diff undo" -- "$cur"))
		return
	fi
	case $prev in
	--owner | --since)
		return ;;
	-o | --output)
		COMPREPLY=($(compgen -W "json" -- "$cur"))
		return ;;
	--journal-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="--owner --since --journal-dir -h --help"
		[[ ${COMP_WORDS[2]} == list ]] && flags+=" -o --output"
		[[ ${COMP_WORDS[2]} == undo ]] && flags+=" --dry-run"
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -d -- "$cur"))
}
complete -F _realmfs realmfs
