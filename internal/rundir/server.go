package rundir

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket's bounds: a client has RequestPatience to send its
// request, and at most MaxConns are served at once (the rest wait in the
// listen backlog, holding none of the daemon's descriptors). A client that
// connects and sends nothing so holds a slot for a moment, not for ever,
// and never the daemon's exit.
const (
	RequestPatience = 5 * time.Second
	MaxConns        = 32
)

// A Handler answers one request: decode reads it (JSON) into v; the
// value returned is encoded as the reply.
type Handler func(decode func(v any) error) any

// refusal is the reply to a request the server does not pass on: the
// "error" field every reply carries.
type refusal struct {
	Error string `json:"error"`
}

// A Server answers a control socket's requests, one connection each,
// from root and the daemon's own user only (SO_PEERCRED), whatever the
// socket's modes.
type Server struct {
	l    *net.UnixListener
	path string
	// ino is the socket file's inode as bound: Close removes the name
	// only while it still leads there.
	ino    uint64
	logger *slog.Logger
	done   chan struct{}
	wg     sync.WaitGroup
	// conns: the connections served now, closed at Close.
	connsMu  sync.Mutex
	conns    map[*net.UnixConn]struct{}
	stopping bool
}

// Listen makes dir (0700, the daemon's user's) and serves h at path,
// replacing a socket a killed daemon left there.
func Listen(dir, path string, h Handler, logger *slog.Logger) (*Server, error) {
	l, err := listen(dir, path)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		l.Close()
		return nil, err
	}
	s := &Server{l: l, path: path, ino: st.Ino, logger: logger, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.serve(h)
	}()
	return s, nil
}

// listen listens at path in dir, made the daemon's user's and 0700.
func listen(dir, path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return nil, fmt.Errorf("%s is not a directory of uid %d", dir, os.Geteuid())
	}
	if st.Mode&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := unix.Lstat(path, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		os.Remove(path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Close stops serving: the listener and every connection still served are
// closed (a client reading its answer, or one that never sent its
// request, gets EOF now, and the daemon's exit waits for no one), the
// handlers running are waited for, and the socket's name is removed if
// it is still this server's. A daemon closes its socket after its
// unmount, and the next mount may have been given the same device number,
// and so the same name, by then: its socket is left alone.
func (s *Server) Close() error {
	s.l.Close()
	s.closeConns() // frees the slots serve may wait for
	<-s.done
	s.wg.Wait()
	var st unix.Stat_t
	if err := unix.Lstat(s.path, &st); err != nil || st.Ino != s.ino {
		return nil // gone, or another daemon's now
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control socket: %w", err)
	}
	return nil
}

// serve accepts and answers connections until the listener is closed. An
// accept that fails for a moment (no descriptor left) is retried after a
// pause that grows to a second.
func (s *Server) serve(h Handler) {
	slots := make(chan struct{}, MaxConns)
	var pause time.Duration
	for {
		slots <- struct{}{}
		conn, err := s.l.AcceptUnix()
		if err != nil {
			<-slots
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			s.logger.Warn("control socket: accept", "err", err, "retry_in", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if !s.track(conn) { // stopping
			conn.Close()
			<-slots
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-slots }()
			defer s.untrack(conn)
			_ = json.NewEncoder(conn).Encode(answer(conn, h))
		}()
	}
}

// answer checks conn's peer and passes its request to h.
func answer(conn *net.UnixConn, h Handler) any {
	if uid, err := peerUID(conn); err != nil || (uid != 0 && uid != uint32(os.Geteuid())) {
		return refusal{fmt.Sprintf("refused: only root and the daemon's user (uid %d) may ask", os.Geteuid())}
	}
	conn.SetReadDeadline(time.Now().Add(RequestPatience))
	dec := json.NewDecoder(bufio.NewReader(conn))
	return h(func(v any) error {
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("a bad request: %w", err)
		}
		return nil
	})
}

// track notes conn as served, for closeConns; false once stopping.
func (s *Server) track(conn *net.UnixConn) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.stopping {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*net.UnixConn]struct{})
	}
	s.conns[conn] = struct{}{}
	return true
}

// untrack closes conn, served.
func (s *Server) untrack(conn *net.UnixConn) {
	s.connsMu.Lock()
	delete(s.conns, conn)
	s.connsMu.Unlock()
	conn.Close()
}

// closeConns closes every connection served, at Close.
func (s *Server) closeConns() {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	s.stopping = true
	for conn := range s.conns {
		conn.Close()
	}
}

// peerUID is the uid of the process at the other end of c (SO_PEERCRED).
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return cred.Uid, nil
}

// Ask sends req to the control socket at path and decodes the answer
// into reply. The reply's own "error" field is the caller's to read.
func Ask(path string, req, reply any) error {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("the daemon's control socket %s: %w", path, err)
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return fmt.Errorf("asking the daemon: %w", err)
	}
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(reply); err != nil {
		return fmt.Errorf("the daemon's answer: %w", err)
	}
	return nil
}
