// Package guard is the mount's admission: the decisions that say whether
// an operation may touch a name or an object, as functions of the policy,
// workspace paths and file identities. It holds the identity sets of
// credentials, protected files and the protected directories the mount
// made, the set of files made through the mount (and its store across
// mounts), the symlink target rules, the host meaning of modes and
// extended attributes, and the steps of an operation's admission: of a
// name (AdmitEntry, JudgeName, JudgeRename, JudgeSymlink), of an object
// itself (JudgeSelf), of an object made for another user (MadeByCall),
// and by the lock table (NameLocks). It knows nothing of go-fuse: fusefs
// builds the paths from its node tree, asks the guard, and audits and
// answers a refusal. What the guard reads of BACKING it reads through
// dirfd, from fds it is handed.
package guard
