package lab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// Result is what a client saw.
type Result string

// Client results.
const (
	Connected   Result = "connected"
	Answered    Result = "answered" // a datagram, by one from its destination
	TimedOut    Result = "timed out"
	Reset       Result = "reset"
	Refused     Result = "refused"
	Unreachable Result = "unreachable"
	Failed      Result = "failed"
)

// Outcome is one connection attempt.
type Outcome struct {
	From     string
	Target   string
	Result   Result
	ServedBy string // the pod that answered, when connected
	Elapsed  time.Duration
	Err      string
}

func (o Outcome) String() string {
	s := fmt.Sprintf("%s -> %s: %s after %s", o.From, o.Target, o.Result, o.Elapsed.Round(time.Millisecond))
	if o.ServedBy != "" {
		s += " (served by " + o.ServedBy + ")"
	} else if o.Result == Connected {
		s += " (no reply: " + o.Err + ")"
	}
	if o.Err != "" && o.Result == Failed {
		s += ": " + o.Err
	}
	return s
}

// Traffic drives the scenario's clients and reports what each saw, in
// the clients' order.
func Traffic(sc *Scenario) ([]Outcome, error) {
	results := make([][]Outcome, len(sc.Clients))
	errs := make([]error, len(sc.Clients))
	var kept keeper
	defer kept.close()
	var group sync.WaitGroup
	for i, c := range sc.Clients {
		if c.Alongside {
			time.Sleep(20 * time.Millisecond)
		} else {
			group.Wait()
		}
		group.Add(1)
		go func() {
			defer group.Done()
			if c.UDP {
				results[i], errs[i] = exchange(c)
			} else {
				results[i], errs[i] = attempts(c, &kept)
			}
		}()
	}
	group.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(results...), nil
}

// attempts makes a TCP client's connections, one after the other or
// (Concurrent) all at once.
func attempts(c Client, kept *keeper) ([]Outcome, error) {
	res := make([]Outcome, c.Count)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	for i := 0; i < c.Count; i++ {
		attempt := func(i int) {
			defer wg.Done()
			o, err := connect(c, kept)
			if err != nil {
				errMu.Lock()
				firstErr = errors.Join(firstErr, err)
				errMu.Unlock()
			}
			res[i] = o
		}
		wg.Add(1)
		if c.Concurrent {
			go attempt(i)
			// Stagger the SYNs so that they reach the listener one after
			// the other, as real clients would.
			time.Sleep(20 * time.Millisecond)
		} else {
			attempt(i)
		}
	}
	wg.Wait()
	for extra := 0; extra < maxServedByEach && !servedByEach(res, c.ServedByEach); extra++ {
		o, err := connect(c, kept)
		firstErr = errors.Join(firstErr, err)
		res = append(res, o)
	}
	return res, firstErr
}

// maxServedByEach bounds the connections a client makes past its Count
// for Client.ServedByEach: with two endpoints chosen at random, each
// answering half, 64 miss one with a chance of 2^-63.
const maxServedByEach = 64

// servedByEach says whether every one of servers answered one of the
// outcomes.
func servedByEach(outcomes []Outcome, servers []string) bool {
	for _, s := range servers {
		if !slices.ContainsFunc(outcomes, func(o Outcome) bool { return o.ServedBy == s }) {
			return false
		}
	}
	return true
}

// keeper holds the connections of clients that Keep them.
type keeper struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (k *keeper) keep(c net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.conns = append(k.conns, c)
}

func (k *keeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

func connect(c Client, kept *keeper) (Outcome, error) {
	o := Outcome{From: c.Namespace, Target: c.Target}
	if c.Src != "" {
		o.From += " (" + c.Src + ")"
	}
	start := time.Now()
	var conn net.Conn
	var derr error
	err := netns.Do(filepath.Join(netns.RunDir, c.Namespace), func() error {
		d := net.Dialer{Timeout: c.Timeout}
		if c.Src != "" || c.SrcPort != 0 {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.Src), Port: c.SrcPort}
		}
		conn, derr = d.Dial("tcp", c.Target)
		return nil
	})
	if err != nil {
		return o, err
	}
	o.Result = classify(derr)
	if derr != nil {
		o.Err = derr.Error()
		o.Elapsed = time.Since(start)
		return o, nil
	}
	if c.Keep {
		kept.keep(conn)
	} else {
		defer conn.Close()
	}
	// Connected: the handshake completed. A server that never accepts
	// leaves the connection in its accept queue without a reply.
	conn.SetDeadline(time.Now().Add(c.Timeout))
	line, rerr := bufio.NewReader(conn).ReadString('\n')
	if fields := strings.Fields(line); len(fields) > 0 {
		o.ServedBy = fields[0]
	}
	if rerr != nil {
		o.Err = rerr.Error()
	}
	if c.OutOfWindow != nil && rerr == nil {
		if err := sendOutOfWindow(conn.(*net.TCPConn), c.OutOfWindow); err != nil {
			return o, err
		}
	}
	o.Elapsed = time.Since(start)
	return o, nil
}

func classify(err error) Result {
	var ne net.Error
	switch {
	case err == nil:
		return Connected
	case errors.As(err, &ne) && ne.Timeout():
		return TimedOut
	case errors.Is(err, syscall.ECONNRESET):
		return Reset
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	}
	return Failed
}

// ListenBacklog listens on addr (either family) with an explicit backlog
// (net.Listen always uses somaxconn).
func ListenBacklog(addr string, backlog int) (net.Listener, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	var family int
	var sa syscall.Sockaddr
	if ap.Addr().Is4() {
		family, sa = syscall.AF_INET, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	} else {
		family, sa = syscall.AF_INET6, &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	return net.FileListener(f)
}

// ServeOptions say how Serve answers.
type ServeOptions struct {
	Name    string // the answer
	Backlog int    // the listen backlog; 0: 4096
	// NoAccept leaves connections in the accept queue.
	NoAccept bool
	// Hold keeps each connection open after the answer until the client
	// closes it (or a minute passes), as a server streaming a response
	// would.
	Hold bool
	// Bulk is how many bytes more the answer's line carries after the name
	// and a space, as a TLS server's certificates make its first flight
	// larger than a packet.
	Bulk int
	// ReadyFile is created once listening.
	ReadyFile string
}

// answer is the line a server answers with: its name, then bulk filler.
func (o ServeOptions) answer() []byte {
	if o.Bulk == 0 {
		return []byte(o.Name + "\n")
	}
	return []byte(o.Name + " " + strings.Repeat("x", o.Bulk) + "\n")
}

// Serve answers every connection on addr as o says. It runs until killed.
func Serve(addr string, o ServeOptions) error {
	backlog := o.Backlog
	if backlog <= 0 {
		backlog = 4096
	}
	ln, err := ListenBacklog(addr, backlog)
	if err != nil {
		return err
	}
	if o.ReadyFile != "" {
		if err := os.WriteFile(o.ReadyFile, nil, 0o644); err != nil {
			return err
		}
	}
	if o.NoAccept {
		// Sleep, not select{}: with no other goroutine the runtime would
		// call an empty select a deadlock and exit, closing the listener.
		for {
			time.Sleep(time.Hour)
		}
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			c.Write(o.answer())
			if o.Hold {
				c.SetReadDeadline(time.Now().Add(time.Minute))
				io.Copy(io.Discard, c)
			}
		}()
	}
}
