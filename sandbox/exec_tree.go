package sandbox

// treeSweepFuncs are the POSIX sh functions (busybox sh and dash run them)
// with which realm kills one exec's process tree inside a sandbox: the
// Podman killer, and OpenShell's wrapper and kill script, share them.
//
// A process is a member of the tree when, in a scan of /proc,
//
//   - its environment (/proc/PID/environ, fixed at its exec) carries
//     REALM_EXEC=$tok, the exec's mark, which children inherit;
//   - or its parent is a member (ppid descendants: this keeps a child that
//     cleared REALM_EXEC and called setsid, while its parent lives);
//   - or it is in a member's session, or in the session $sid (a child whose
//     parent is gone stays in its session unless it calls setsid);
//   - or it is $root (OpenShell: the wrapper, whose cmdline the caller
//     checked).
//
// Sessions in $xs are never followed whole ("0 1", the caller's own, the
// session the OpenShell wrapper was started in): those hold processes that
// are not the exec's.
//
// tree_pass SIGSTOPs every member it finds and rescans until a scan finds
// no new one: a stopped process cannot fork, and a child forked just
// before its parent was stopped still has that parent, so the rescan finds
// it. Then it SIGKILLs them all and sets live to how many it signalled.
// Zombies are dead (they wait only to be reaped) and are not members.
//
// tree_kill repeats tree_pass until one finds no live member (return 0) or
// 50 passes, about five seconds, did (return 1: survivors, e.g. a process
// in uninterruptible sleep).
//
// What this cannot see: a process that left every member's session,
// cleared REALM_EXEC, and whose parent had already exited (so it was
// reparented to the sandbox's init) before the first scan; and a process
// whose /proc/PID/environ the sweep cannot read (made itself non-dumpable,
// or runs as another user).
const treeSweepFuncs = `
pstat() {
	{ read -r l <"$1/stat"; } 2>/dev/null || return 1
	id=${l%% *}
	set -- ${l##*) }
	st=$1 pp=$2 sd=$4
}
tree_pass() {
	mem=" " sids=" " new=1
	case "$xs" in *" $sid "*) ;; *) [ -n "$sid" ] && sids=" $sid " ;; esac
	while [ $new = 1 ]; do
		new=0
		toks=$(grep -ls "` + execTokenVar + `=$tok" /proc/[0-9]*/environ 2>/dev/null)
		for pd in /proc/[0-9]*; do
			p=${pd#/proc/}
			case "$mem" in *" $p "*) continue ;; esac
			[ "$p" = 1 ] || [ "$p" = "$me" ] && continue
			pstat "$pd" || continue
			[ "$st" = Z ] && continue
			in=0
			[ "$p" = "$root" ] && in=1
			case "$sids" in *" $sd "*) in=1 ;; esac
			case "$mem" in *" $pp "*) in=1 ;; esac
			case "$toks" in *"$pd/environ"*) in=1 ;; esac
			[ $in = 1 ] || continue
			kill -STOP "$p" 2>/dev/null
			mem="$mem$p " new=1
			case "$xs$sids" in *" $sd "*) ;; *) sids="$sids$sd " ;; esac
		done
	done
	live=0
	for p in $mem; do
		kill -KILL "$p" 2>/dev/null && live=$((live + 1))
	done
}
tree_kill() {
	i=0
	while :; do
		tree_pass
		[ $live = 0 ] && return 0
		i=$((i + 1))
		[ $i -ge 50 ] && return 1
		sleep 0.1 2>/dev/null || sleep 1
	done
}
`
