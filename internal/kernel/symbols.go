package kernel

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Symbols is the kernel's text symbol table (/proc/kallsyms), used to name
// drop locations and to tell which probe candidates exist. It lives as
// long as a capture, so its 100,000 and more names are kept in one string
// with offsets, not a string and a map entry each: a fifth of the memory.
// Names are looked up a few dozen times a start (Has, Range) and addresses
// for every drop shown (Name): only the addresses are sorted.
type Symbols struct {
	names string   // every name, one after another
	ends  []uint32 // where name i ends in names; it starts where i-1 ends
	// byAddr orders the symbols with an address (addrs, ascending).
	byAddr []uint32
	addrs  []uint64
}

// LoadSymbols reads /proc/kallsyms. Addresses read as zero (kptr_restrict)
// leave Name unable to resolve, but Has still works.
func LoadSymbols() (*Symbols, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	defer f.Close()
	s, err := parseSymbols(f)
	if err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	return s, nil
}

// parseSymbols reads the text symbols of a kallsyms listing: lines of
// address, type and name (and a module, ignored). Every capture starts with
// it, over 100,000 lines and more, and a TCG guest pays twentyfold what
// this machine does: the fields are cut by hand, and the addresses are
// sorted unstably as pairs with the line as the tie-break (the order a
// stable sort gives). bytes.Fields, a string per address and stable sorts
// through an index by name and by address were a sixth of nettrace's
// start.
func parseSymbols(r io.Reader) (*Symbols, error) {
	var names strings.Builder
	s := &Symbols{}
	type located struct {
		addr uint64
		sym  uint32
	}
	var withAddr []located
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		addr, kind, name, ok := symbolLine(sc.Bytes())
		if !ok || (kind != 't' && kind != 'T') {
			continue
		}
		if addr != 0 {
			withAddr = append(withAddr, located{addr, uint32(len(s.ends))})
		}
		names.Write(name)
		s.ends = append(s.ends, uint32(names.Len()))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	s.names = names.String()
	slices.SortFunc(withAddr, func(a, b located) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.sym, b.sym))
	})
	s.byAddr = make([]uint32, len(withAddr))
	s.addrs = make([]uint64, len(withAddr))
	for i, l := range withAddr {
		s.byAddr[i], s.addrs[i] = l.sym, l.addr
	}
	return s, nil
}

// symbolLine splits a kallsyms line into its address (zero when it is not
// hex, as kptr_restrict prints it), its one-letter type and its name. ok is
// false for a line without the three.
func symbolLine(line []byte) (addr uint64, kind byte, name []byte, ok bool) {
	hex, rest, found := bytes.Cut(line, []byte{' '})
	if !found || len(rest) < 3 || rest[1] != ' ' {
		return 0, 0, nil, false
	}
	kind, name = rest[0], rest[2:]
	if end := bytes.IndexAny(name, " \t"); end >= 0 {
		name = name[:end]
	}
	if len(name) == 0 {
		return 0, 0, nil, false
	}
	addr, err := strconv.ParseUint(string(hex), 16, 64)
	if err != nil {
		addr = 0
	}
	return addr, kind, name, true
}

// name is symbol i's name.
func (s *Symbols) name(i uint32) string {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.names[start:s.ends[i]]
}

// Has says whether a function symbol exists (is not inlined away).
func (s *Symbols) Has(name string) bool {
	for i := range s.ends {
		if s.name(uint32(i)) == name {
			return true
		}
	}
	return false
}

// Name renders an address as symbol+0xoffset, or hex when unknown.
func (s *Symbols) Name(addr uint64) string {
	// The last symbol at or below addr: the one after it is above.
	i, _ := slices.BinarySearch(s.addrs, addr+1)
	i--
	if i < 0 || addr == 0 {
		return fmt.Sprintf("%#x", addr)
	}
	return fmt.Sprintf("%s+%#x", s.name(s.byAddr[i]), addr-s.addrs[i])
}

// Range returns the text range of a function: its address up to the next
// symbol's (the lowest-addressed, when several share the name). ok is
// false when it is unknown or its address is unreadable.
func (s *Symbols) Range(name string) (start, end uint64, ok bool) {
	for i, sym := range s.byAddr {
		if i+1 < len(s.addrs) && s.name(sym) == name {
			return s.addrs[i], s.addrs[i+1], true
		}
	}
	return 0, 0, false
}
