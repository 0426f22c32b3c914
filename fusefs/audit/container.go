package audit

// ContainerOf returns the container id in a cgroup owner's path (the
// audit line's container field; realmctl tells its sessions' changes in
// the journal by it), "" when there is none.
func ContainerOf(owner string) string { return containerOf(owner) }
