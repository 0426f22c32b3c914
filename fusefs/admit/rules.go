package admit

// Rule ids: what a refusal that no credential glob made matched, one per
// kind of refusal (the refusal table of docs/threat-model.md lists them), as the audit
// log writes them (audit.Event.Rule).
const (
	RuleEscapeResolve       = "escape:resolve"        // resolving a name met a symlink or left the root
	RuleEscapeSwapped       = "escape:swapped"        // the object is not the one looked up or made
	RuleEscapeNotRegular    = "escape:not-regular"    // data open of what is no regular file
	RuleEscapeSymlinkTarget = "escape:symlink-target" // a symlink's target is absolute, not normal, climbs out of the root or names a temp
	RuleEscapeUnscanned     = "escape:unscanned"      // a directory moved shallower whose links could not all be read
	RuleEscapeTempName      = "escape:temp-name"      // making a .realm-tmp- name, or .realm-journal
	RuleEscapeWhiteout      = "escape:whiteout"       // rename with RENAME_WHITEOUT
	RuleEscapeMount         = "escape:mount"          // a mount inside BACKING (a bind mount, another filesystem)
	RuleEscapeMovedOut      = "escape:moved-out"      // a directory the host moved out of BACKING
	RuleResourceLimit       = "resource:max-fds"      // the owner holds max_fds_per_owner of the daemon's descriptors
	RuleFdBudget            = "resource:fd-budget"    // the owner holds its share of what the daemon's descriptors leave (fds.go)
	RuleProtected           = "protect"               // a write to a path the protect set refuses
	RuleProtectedIdentity   = "protect:identity"      // a change to a protected file seen under another name
	RuleDeviceNode          = "device-node"           // mknod of a block or character device
	RulePrivilegeSetID      = "privilege:set-id"      // a set-ID bit on what is no directory (chmod refused, create cleared)
	RulePrivilegeXattr      = "privilege:xattr"       // an xattr outside the allowlist (security.capability, trusted.*, ...)
	RuleLockOtherOwner      = "lock:other-owner"      // another owner holds the file's lock
	RuleLockChanged         = "lock:changed-outside"  // the file changed behind the mount while written
	RuleCredentialIdentity  = "credential:identity"   // the file is a credential seen under another name
	RuleCredentialUnscanned = "credential:unscanned"  // a directory rename whose tree could not be scanned whole
)
