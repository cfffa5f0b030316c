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
type Symbols struct {
	names string   // every name, one after another
	ends  []uint32 // where name i ends in names; it starts where i-1 ends
	// byAddr orders the symbols with an address (addrs, ascending);
	// byName orders every symbol by name.
	byAddr []uint32
	addrs  []uint64
	byName []uint32
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
// address, type and name (and a module, ignored).
func parseSymbols(r io.Reader) (*Symbols, error) {
	var names strings.Builder
	s := &Symbols{}
	var addrOf []uint64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 3 || len(fields[1]) != 1 || (fields[1][0] != 't' && fields[1][0] != 'T') {
			continue
		}
		addr, err := strconv.ParseUint(string(fields[0]), 16, 64)
		if err != nil {
			addr = 0
		}
		names.Write(fields[2])
		s.ends = append(s.ends, uint32(names.Len()))
		addrOf = append(addrOf, addr)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	s.names = names.String()
	s.byName = make([]uint32, len(s.ends))
	for i := range s.byName {
		s.byName[i] = uint32(i)
		if addrOf[i] != 0 {
			s.byAddr = append(s.byAddr, uint32(i))
		}
	}
	slices.SortStableFunc(s.byName, func(a, b uint32) int { return strings.Compare(s.name(a), s.name(b)) })
	slices.SortStableFunc(s.byAddr, func(a, b uint32) int { return cmp.Compare(addrOf[a], addrOf[b]) })
	s.addrs = make([]uint64, len(s.byAddr))
	for i, sym := range s.byAddr {
		s.addrs[i] = addrOf[sym]
	}
	return s, nil
}

// name is symbol i's name.
func (s *Symbols) name(i uint32) string {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.names[start:s.ends[i]]
}

// named returns the positions in byName of the symbols called name.
func (s *Symbols) named(name string) []uint32 {
	lo, _ := slices.BinarySearchFunc(s.byName, name, func(i uint32, n string) int { return strings.Compare(s.name(i), n) })
	hi := lo
	for hi < len(s.byName) && s.name(s.byName[hi]) == name {
		hi++
	}
	return s.byName[lo:hi]
}

// Has says whether a function symbol exists (is not inlined away).
func (s *Symbols) Has(name string) bool { return len(s.named(name)) > 0 }

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
