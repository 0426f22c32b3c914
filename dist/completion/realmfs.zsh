#compdef realmfs
# zsh completion for realmfs
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
	'1:backing directory:_directories' \
	'2:mountpoint:_directories'
