package csidriver

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// auditPoll is how often a forwarder looks for new audit lines: a log
// collector's delay, not a guard's (the refusal itself is immediate and
// the line is already in the audit log).
const auditPoll = 250 * time.Millisecond

// podInfo is the pod a volume was published for, from the volume context
// the kubelet adds when the CSIDriver asks for pod info.
type podInfo struct {
	Namespace      string `json:"namespace,omitempty"`
	Name           string `json:"name,omitempty"`
	UID            string `json:"uid,omitempty"`
	ServiceAccount string `json:"service_account,omitempty"`
}

func podFrom(volCtx map[string]string) podInfo {
	return podInfo{
		Namespace: volCtx[k8sPrefix+"pod.namespace"], Name: volCtx[k8sPrefix+"pod.name"],
		UID: volCtx[k8sPrefix+"pod.uid"], ServiceAccount: volCtx[k8sPrefix+"serviceAccount.name"],
	}
}

// forwarders copy each served volume's audit log onto the plugin's log (its
// stderr, JSON lines), tagged with the volume and the pod of the publish
// that started its daemon, so that a cluster's log collector has every
// refusal. One per volume: a volume's targets on this node share one
// daemon and one audit log.
type forwarders struct {
	mu   sync.Mutex
	byID map[string]*forwarder
}

type forwarder struct {
	stop chan struct{} // closed: drain what is left and return
	done chan struct{} // closed when the forwarder has returned
}

// forwardAudit starts forwarding the audit log of volume id from offset
// (the log's size before its daemon started, or its end for a daemon a
// previous plugin started: what was written meanwhile stays in the file).
// The log is opened now, so that offset is of this file even if it is
// rotated before the forwarder runs.
func (d *Driver) forwardAudit(id string, pod podInfo, offset int64) {
	d.fwd.mu.Lock()
	defer d.fwd.mu.Unlock()
	if d.fwd.byID == nil {
		d.fwd.byID = map[string]*forwarder{}
	}
	if _, ok := d.fwd.byID[id]; ok {
		return
	}
	f := &forwarder{stop: make(chan struct{}), done: make(chan struct{})}
	d.fwd.byID[id] = f
	path := d.auditPath(id)
	file, err := os.Open(path)
	if err != nil {
		file, offset = nil, 0 // not made yet: read the one realmfs makes from its start
	}
	go d.follow(f, id, pod, path, file, offset)
}

// stopAudit forwards what is left of id's audit log (its daemon has
// exited) and stops.
func (d *Driver) stopAudit(id string) {
	d.fwd.mu.Lock()
	f := d.fwd.byID[id]
	delete(d.fwd.byID, id)
	d.fwd.mu.Unlock()
	if f != nil {
		close(f.stop)
		<-f.done
	}
}

// follow forwards the audit log as it grows until stopped, then what is
// left.
func (d *Driver) follow(f *forwarder, id string, pod podInfo, path string, file *os.File, offset int64) {
	defer close(f.done)
	t := time.NewTicker(auditPoll)
	defer t.Stop()
	for {
		file, offset = d.catchUp(file, offset, id, pod, path)
		select {
		case <-f.stop:
			if file, _ = d.catchUp(file, offset, id, pod, path); file != nil {
				file.Close()
			}
			return
		case <-t.C:
		}
	}
}

// catchUp forwards every complete line there is from offset in file (nil:
// none open yet). realmfs rotates the log by renaming it to path.1 and
// starting a new file: the old file is read to its end, then the new one
// from its start.
func (d *Driver) catchUp(file *os.File, offset int64, id string, pod podInfo, path string) (*os.File, int64) {
	for {
		if file == nil {
			var err error
			if file, err = os.Open(path); err != nil {
				return nil, 0
			}
			offset = 0
		}
		offset = d.emitLines(file, offset, id, pod)
		if !rotated(file, path) {
			return file, offset
		}
		d.emitLines(file, offset, id, pod) // what came before the rename
		file.Close()
		file = nil
	}
}

// emitLines logs each complete line from offset and returns the offset
// after the last one (a line still being written is read next time).
func (d *Driver) emitLines(file *os.File, offset int64, id string, pod podInfo) int64 {
	if st, err := file.Stat(); err == nil && st.Size() < offset {
		offset = 0 // truncated
	}
	if _, err := file.Seek(offset, io.SeekStart); err != nil {
		return offset
	}
	r := bufio.NewReader(file)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return offset // io.EOF, or an incomplete last line
		}
		offset += int64(len(line))
		var event json.RawMessage = line[:len(line)-1]
		if !json.Valid(event) {
			event, _ = json.Marshal(string(event))
		}
		d.cfg.Log.Info("audit", "volume", id, "pod", pod, "event", event)
	}
}

// rotated reports whether path no longer names the open file.
func rotated(file *os.File, path string) bool {
	open, err1 := file.Stat()
	now, err2 := os.Stat(path)
	if err2 != nil {
		return errors.Is(err2, os.ErrNotExist)
	}
	if err1 != nil {
		return false
	}
	a, ok1 := open.Sys().(*syscall.Stat_t)
	b, ok2 := now.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && (a.Ino != b.Ino || a.Dev != b.Dev)
}
