package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/containers/podman/v5/pkg/bindings/images"

	"github.com/realm-dev/realm/errcode"
)

// DefaultImage is the image sessions run when --image is not given. No
// registry is reachable where realm is built and tested, so `realmctl image
// init` builds it from the host's busybox-static.
const DefaultImage = "localhost/realm-base:latest"

// DefaultBusybox is where Debian's busybox-static installs its binary.
const DefaultBusybox = "/bin/busybox"

// BaseImageUID is the unprivileged user the base image knows by name; the
// sandbox may run as any uid all the same.
const BaseImageUID = 1000

// InitImage builds DefaultImage from the statically linked busybox at
// busybox and imports it into the Podman service that conn (a bindings
// connection context) talks to. It returns the new image's id.
//
// The rootfs is made here, in memory-bounded streaming form, rather than with
// a Containerfile: building needs a base image, and there is none to pull.
func InitImage(conn context.Context, busybox string) (string, error) {
	applets, err := busyboxApplets(busybox)
	if err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRootfs(pw, busybox, applets)) }()
	defer pr.Close()

	ref := DefaultImage
	msg := "realm base image: busybox-static rootfs made by realmctl image init"
	changes := []string{
		`ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin`,
		`WORKDIR /workspace`,
		`CMD ["/bin/sh"]`,
	}
	report, err := images.Import(conn, pr, &images.ImportOptions{
		Reference: &ref,
		Message:   &msg,
		Changes:   &changes,
	})
	if err != nil {
		return "", errcode.Wrap(errcode.RealmNotActive, err, "the Podman service did not import %s", DefaultImage)
	}
	return report.Id, nil
}

// busyboxApplets checks that busybox is a static executable (a dynamic one
// would find no libc in the image) and returns its applets as paths relative
// to the root, e.g. "bin/sh".
func busyboxApplets(busybox string) ([]string, error) {
	f, err := elf.Open(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox at %s is not an executable (install busybox-static): %w", busybox, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("busybox at %s is dynamically linked; install busybox-static", busybox)
		}
	}
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("list the applets of %s: %w", busybox, err)
	}
	var applets []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, "..") || path.IsAbs(line) {
			continue
		}
		applets = append(applets, path.Clean(line))
	}
	sort.Strings(applets)
	return applets, nil
}

// Base image files other than busybox and its applets.
const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	etcGroup  = "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"
)

// writeRootfs writes the base image's root file system as a tar stream.
func writeRootfs(w io.Writer, busybox string, applets []string) error {
	bin, err := os.Open(busybox)
	if err != nil {
		return err
	}
	defer bin.Close()
	st, err := bin.Stat()
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	dir := func(name string, mode int64) error {
		if dirs[name] {
			return nil
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	for _, d := range []struct {
		name string
		mode int64
	}{
		{"bin", 0o755}, {"sbin", 0o755}, {"usr", 0o755}, {"usr/bin", 0o755}, {"usr/sbin", 0o755},
		{"etc", 0o755}, {"root", 0o700}, {"tmp", 0o1777}, {"workspace", 0o755},
		{"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}, {"run", 0o755}, {"var", 0o755},
	} {
		if err := dir(d.name, d.mode); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: st.Size(), ModTime: now}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, bin); err != nil {
		return err
	}
	for _, f := range []struct{ name, data string }{{"etc/passwd", etcPasswd}, {"etc/group", etcGroup}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, bytes.NewReader([]byte(f.data))); err != nil {
			return err
		}
	}
	for _, a := range applets {
		if a == "bin/busybox" {
			continue
		}
		if err := dir(path.Dir(a), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", ModTime: now}); err != nil {
			return err
		}
	}
	return tw.Close()
}
