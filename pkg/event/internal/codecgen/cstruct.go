package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// matchC checks a payload's fields against its C struct, name (wide) and
// name+"4" (narrow): every member but padding held by a field, no field
// naming a member the struct lacks, and each member of the width its
// field reads in both forms. A member added in C and not in Go, or of
// another width than its field, fails generation, naming it.
func matchC(cStruct cStructs, name string, fs []field) error {
	wide, err := cStruct(name)
	if err != nil {
		return fmt.Errorf("struct %s: %w", name, err)
	}
	narrow, err := cStruct(name + "4")
	if err != nil {
		return fmt.Errorf("struct %s4: %w", name, err)
	}
	unheld := map[string]bool{}
	for _, m := range wide.Members {
		if !strings.HasPrefix(m.Name, "_") {
			unheld[m.Name] = true
		}
	}
	for _, f := range fs {
		for i, m := range f.cMembers {
			if !unheld[m] {
				return fmt.Errorf("field %s: struct %s has no member %s", f.name, name, m)
			}
			delete(unheld, m)
			for _, s := range []*btf.Struct{narrow, wide} {
				if err := f.fits(s, m, i, s == wide); err != nil {
					return fmt.Errorf("field %s: %s.%s: %w", f.name, s.Name, m, err)
				}
			}
		}
	}
	if len(unheld) > 0 {
		missing := make([]string, 0, len(unheld))
		for m := range unheld {
			missing = append(missing, m)
		}
		sort.Strings(missing)
		return fmt.Errorf("no field is tagged with %s of struct %s", strings.Join(missing, ", "), name)
	}
	return nil
}

// nameSize is NT_IFNAMSIZ, the length of event.Name.
const nameSize = 16

// fits says whether member (the field's i-th) of s has the size the
// field reads from it in that form.
func (f field) fits(s *btf.Struct, member string, i int, wide bool) error {
	var typ btf.Type
	for _, m := range s.Members {
		if m.Name == member {
			typ = m.Type
		}
	}
	if typ == nil {
		return fmt.Errorf("missing")
	}
	if f.kind == "Tuple" {
		want := "nt_tuple4"
		if wide {
			want = "nt_tuple"
		}
		if t, ok := btf.UnderlyingType(typ).(*btf.Struct); !ok || t.Name != want {
			return fmt.Errorf("a Tuple reads a struct %s", want)
		}
		return nil
	}
	size, err := btf.Sizeof(typ)
	if err != nil {
		return err
	}
	want := f.width // an integer's
	switch {
	case f.kind == "Name":
		want = nameSize
	case f.kind == "Addr", f.kind == "AddrPort" && i == 0:
		want = 4
		if wide {
			want = 16
		}
	case f.kind == "AddrPort":
		want = 2 // the port
	}
	if size != want {
		return fmt.Errorf("%d bytes, the field reads %d", size, want)
	}
	return nil
}
