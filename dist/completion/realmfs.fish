# fish completion for realmfs, generated from its flag sets, its -o table and
# errcode's codes by `make completions` (cmd/realmfs/distgen_test.go): do not edit.
function __realmfs_options
	set -l pre (string match -r '^.*,' -- (commandline -ct))
	for o in allow_other default_permissions ro fsname= subtype= passthrough=on passthrough=off lockowner=cgroup lockowner=session lockowner=pid durability=full durability=atomic policy= audit_log= log= log_format=text log_format=json state_dir=none state_dir= nonempty debug auto_unmount max_fds_per_owner= procs= journal=on journal=off journal_dir= journal_max= journal_max_files= journal_keep= watch=on watch=off entry_timeout= attr_timeout= negative_timeout=
		echo $pre$o
	end
end
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l audit-log -r -F -d 'append one JSON line per refusal to FILE'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l check-policy -r -F -d 'validate the policy in FILE and exit 0'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -s d -l debug -d 'log every FUSE request'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -s f -l foreground -d 'stay in the foreground'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l log -r -F -d 'append the daemon\'s log'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l log-format -x -a 'text json' -d 'write the daemon log as text'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -s o -l options -x -a '(__realmfs_options)' -d 'mount options, comma-separated'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l policy -r -F -d 'enforce the policy in FILE'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l show-policy -d 'print the effective policy'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -l state-dir -x -a '(__fish_complete_directories)' -d 'keep what the daemon remembers across mounts'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -s V -l version -d 'print the version and exit'
complete -c realmfs -n 'not __fish_seen_subcommand_from journal explain audit status' -s h -l help -d 'print this help to standard output and exit'
complete -c realmfs -n '__fish_use_subcommand' -a journal -d 'list, diff or undo the changes made through a mount'
complete -c realmfs -n '__fish_seen_subcommand_from journal; and not __fish_seen_subcommand_from list diff undo' -x -a 'list diff undo'
complete -c realmfs -n '__fish_seen_subcommand_from journal; and __fish_seen_subcommand_from undo' -l dry-run -d 'list what would be undone, change nothing'
complete -c realmfs -n '__fish_seen_subcommand_from journal' -l journal-dir -x -a '(__fish_complete_directories)' -d 'the journal is in DIR'
complete -c realmfs -n '__fish_seen_subcommand_from journal; and __fish_seen_subcommand_from list' -s o -l output -x -a 'json' -d 'json for one JSON object per change'
complete -c realmfs -n '__fish_seen_subcommand_from journal' -l owner -x -d 'only the changes of OWNER'
complete -c realmfs -n '__fish_seen_subcommand_from journal; and __fish_seen_subcommand_from diff' -l policy -r -F -d 'the mount\'s policy FILE, whose credentials\' content is'
complete -c realmfs -n '__fish_seen_subcommand_from journal' -l since -x -d 'only the changes made at or after TIME'
complete -c realmfs -n '__fish_seen_subcommand_from journal' -s h -l help -d 'print this help to standard output and exit'
complete -c realmfs -n '__fish_use_subcommand' -a explain -d 'what the policy does with a workspace path, and by which rule'
complete -c realmfs -n '__fish_seen_subcommand_from explain' -s o -l output -x -a 'json' -d 'json: one JSON object per path'
complete -c realmfs -n '__fish_seen_subcommand_from explain' -l policy -r -F -d 'judge by the policy in FILE'
complete -c realmfs -n '__fish_seen_subcommand_from explain' -s h -l help -d 'print this help to standard output and exit'
complete -c realmfs -n '__fish_use_subcommand' -a audit -d 'a mount\'s refusals, as a table'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -l code -x -a 'PATH_ESCAPE PROTECTED_PATH_DENIED CREDENTIAL_PATH_DENIED LOCK_CONFLICT WRITE_NOT_ATOMIC SCHEMA_INVALID REALM_NOT_ACTIVE TOOL_TIMEOUT REALM_STOPPING DEVICE_NODE_DENIED WRITER_KILLED_COMMITTED WRITER_KILLED_RECOVERED RESOURCE_LIMIT XATTR_NOT_KEPT PRIVILEGE_DENIED JOURNAL_FAILED' -d 'only the lines of CODE'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -s f -l follow -d 'go on printing lines as they are written, until interrupted'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -s n -l lines -x -d 'print the last N lines'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -s o -l output -x -a 'json' -d 'json: the log\'s own JSON lines'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -l owner -x -d 'only the lines of lock owner OWNER'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -l since -x -d 'only the lines at or after TIME'
complete -c realmfs -n '__fish_seen_subcommand_from audit' -s h -l help -d 'print this help to standard output and exit'
complete -c realmfs -n '__fish_use_subcommand' -a status -d 'what each realmfs mount holds now, as its daemon tells it'
complete -c realmfs -n '__fish_seen_subcommand_from status' -s o -l output -x -a 'json' -d 'json: one JSON object per mount'
complete -c realmfs -n '__fish_seen_subcommand_from status' -s h -l help -d 'print this help to standard output and exit'
