package csidriver

import (
	"bytes"
	"errors"
	"io/fs"
	"os"

	"google.golang.org/grpc/codes"
)

// A volume published for writing is claimed for this node by
// BASE/volumes/<id>.writer, which holds the node's id. Kubernetes does not
// stop a ReadWriteOnce volume with no attach step from reaching a second
// node, so the plugin does: a writer publish on another node while the
// claim is held is FailedPrecondition (oneWriterNode says why). The claim
// is beside the record, in the base dir every node shares.

func (d *Driver) writerPath(id string) string { return d.volumeDir(id) + ".writer" }

// claimWriter makes this node the volume's writer node, or finds it is.
// The claim is written whole to a temp file and linked into place, so it
// exists only with its content and only one node's link succeeds.
func (d *Driver) claimWriter(id string) error {
	path := d.writerPath(id)
	tmp := path + "." + d.cfg.NodeID + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.cfg.NodeID), 0o644); err != nil {
		return errf(codes.Internal, "claim volume %s: %v", id, err)
	}
	defer os.Remove(tmp)
	err := os.Link(tmp, path)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return errf(codes.Internal, "claim volume %s: %v", id, err)
	}
	holder, rerr := os.ReadFile(path)
	switch {
	case rerr != nil:
		return errf(codes.Internal, "read the claim of volume %s: %v", id, rerr)
	case bytes.Equal(holder, []byte(d.cfg.NodeID)):
		return nil
	}
	return errf(codes.FailedPrecondition, "volume %s is published for writing on node %s: %s", id, holder, oneWriterNode)
}

// releaseWriter gives up this node's claim on the volume, if it holds it.
func (d *Driver) releaseWriter(id string) error {
	holder, err := os.ReadFile(d.writerPath(id))
	if err != nil || !bytes.Equal(holder, []byte(d.cfg.NodeID)) {
		return nil
	}
	if err := os.Remove(d.writerPath(id)); err != nil && !isNotExist(err) {
		return errf(codes.Internal, "release the claim of volume %s: %v", id, err)
	}
	return nil
}
