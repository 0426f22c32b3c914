package csidriver

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestMountFlagsAllowlisted: a volume capability's mount_flags (a PV's or
// a StorageClass's mountOptions) reached realmfs's -o unchecked (found by
// an adversarial review, 2026-12-04): policy= replaced the volume's
// policy, journal_dir=, log=, audit_log= and state_dir= chose files the
// root daemon writes, fsname= hid a mount from the driver (its daemon
// never stopped) and debug kept realmfs in the foreground (the publish
// hung under the node's lock). Only the options of how the mount behaves
// pass; any other is InvalidArgument, naming it.
func TestMountFlagsAllowlisted(t *testing.T) {
	d := newTestDriver(t)
	const target = "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/v/mount"
	for _, bad := range []string{"policy=/tmp/attacker-policy.yaml", "journal_dir=/var/lib/x/j", "fsname=/elsewhere",
		"debug", "log=/tmp/l", "audit_log=/tmp/a", "state_dir=/tmp/s", "nonempty", "auto_unmount", "rw", "durability=full,debug"} {
		req := publishReq("v1", target, map[string]string{})
		req.VolumeCapability.GetMount().MountFlags = []string{bad}
		_, err := (nodeServer{Driver: d}).checkPublish(req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not one realm-csi passes") {
			t.Errorf("mount flag %q: %v, want InvalidArgument naming it", bad, err)
		}
	}
	req := publishReq("v1", target, map[string]string{})
	req.VolumeCapability.GetMount().MountFlags = []string{"durability=atomic", "journal=off,passthrough=off"}
	p, err := (nodeServer{Driver: d}).checkPublish(req)
	if err != nil {
		t.Fatalf("allowed mount flags refused: %v", err)
	}
	args, err := d.realmfsArgs(p)
	if err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(args, " "); !strings.Contains(cmd, "durability=atomic,journal=off,passthrough=off") {
		t.Errorf("allowed mount flags not passed on: realmfs %s", cmd)
	}
}
