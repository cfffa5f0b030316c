package kernel

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Symbols is the kernel's text symbol table (/proc/kallsyms), used to name
// drop locations and to tell which probe candidates exist.
type Symbols struct {
	addrs []uint64
	names []string
	has   map[string]bool
}

// LoadSymbols reads /proc/kallsyms. Addresses read as zero (kptr_restrict)
// leave Name unable to resolve, but Has still works.
func LoadSymbols() (*Symbols, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	defer f.Close()
	s := &Symbols{has: make(map[string]bool, 1<<17)}
	type sym struct {
		addr uint64
		name string
	}
	var syms []sym
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		if t := fields[1]; t != "t" && t != "T" {
			continue
		}
		s.has[fields[2]] = true
		addr, err := strconv.ParseUint(fields[0], 16, 64)
		if err == nil && addr != 0 {
			syms = append(syms, sym{addr, fields[2]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	s.addrs = make([]uint64, len(syms))
	s.names = make([]string, len(syms))
	for i, x := range syms {
		s.addrs[i], s.names[i] = x.addr, x.name
	}
	return s, nil
}

// Has says whether a function symbol exists (is not inlined away).
func (s *Symbols) Has(name string) bool { return s.has[name] }

// Name renders an address as symbol+0xoffset, or hex when unknown.
func (s *Symbols) Name(addr uint64) string {
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > addr }) - 1
	if i < 0 || addr == 0 {
		return fmt.Sprintf("%#x", addr)
	}
	return fmt.Sprintf("%s+%#x", s.names[i], addr-s.addrs[i])
}

// Range returns the text range of a function: its address up to the next
// symbol's. ok is false when it is unknown or its address is unreadable.
func (s *Symbols) Range(name string) (start, end uint64, ok bool) {
	for i, n := range s.names {
		if n == name && i+1 < len(s.addrs) {
			return s.addrs[i], s.addrs[i+1], true
		}
	}
	return 0, 0, false
}
