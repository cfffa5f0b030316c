package main

import (
	"bytes"
	"fmt"
)

// writer writes one section's generated operations.
type writer struct {
	b    *bytes.Buffer
	sec  string          // the section type
	at   string          // its layout table in layout_gen.go
	ev   string          // the payload in an event: e.Route
	hand map[string]bool // operations the section's file writes itself
}

// op opens an operation, named <name>Fields when written by hand.
func (w *writer) op(name, params string) {
	if w.hand[name] {
		name += "Fields"
	}
	fmt.Fprintf(w.b, "func (%s) %s%s {\n", w.sec, name, params)
}

func (w *writer) printf(format string, args ...any) { fmt.Fprintf(w.b, format, args...) }

func (w *writer) all(fs []field) {
	w.decode(fs)
	w.encode(fs)
	w.appendCompact(fs)
	w.readCompact(fs)
	w.addrs(fs)
}

// each writes stmt's code for every field (v the field in the event, m
// its first member's offset), within the field's flag test when it has one.
func (w *writer) each(fs []field, stmt func(f field, v, m string) string) {
	for _, f := range fs {
		body := stmt(f, w.ev+"."+f.name, "o."+f.members[0])
		if f.flag != "" {
			body = fmt.Sprintf("if e.Flags&%s != 0 {\n%s}\n", f.flag, body)
		}
		w.printf("%s", body)
	}
}

var uintOf = map[int]string{1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}

// conv is v converted to typ, unless it is of that type already.
func conv(typ, v string, from string) string {
	if typ == from || (typ == "byte" && from == "uint8") {
		return v
	}
	return typ + "(" + v + ")"
}

func (w *writer) decode(fs []field) {
	w.op("decode", "(e *Event, p []byte, l *layout, ipv6 bool)")
	w.printf("o := %s[l.form]\n", w.at)
	w.each(fs, func(f field, v, m string) (s string) {
		switch f.kind {
		case "int":
			if f.width == 1 {
				s = fmt.Sprintf("%s = %s\n", v, conv(f.goType, "p["+m+"]", "uint8"))
			} else {
				s = fmt.Sprintf("%s = %s\n", v, conv(f.goType, fmt.Sprintf("le.Uint%d(p[%s:])", 8*f.width, m), uintOf[f.width]))
			}
		case "Addr":
			s = fmt.Sprintf("%s = l.addr(p[%s:], ipv6)\n", v, m)
		case "AddrPort":
			s = fmt.Sprintf("%s = netip.AddrPortFrom(l.addr(p[%s:], ipv6), le.Uint16(p[o.%s:]))\n", v, m, f.members[1])
		case "Name":
			s = fmt.Sprintf("copy(%s[:], p[%s:])\n", v, m)
		case "Tuple":
			s = fmt.Sprintf("l.tupleOf(p[%s:], &%s)\n", m, v)
		}
		return s
	})
	w.printf("}\n\n")
}

func (w *writer) encode(fs []field) {
	w.op("encode", "(e *Event, p []byte)")
	w.printf("o := %s[formNarrow]\n", w.at)
	w.each(fs, func(f field, v, m string) (s string) {
		switch f.kind {
		case "int":
			if f.width == 1 {
				s = fmt.Sprintf("p[%s] = %s\n", m, conv("uint8", v, f.goType))
			} else {
				s = fmt.Sprintf("le.PutUint%d(p[%s:], %s)\n", 8*f.width, m, conv(uintOf[f.width], v, f.goType))
			}
		case "Addr":
			s = fmt.Sprintf("putAddr4(p[%s:%s+4], %s)\n", m, m, v)
		case "AddrPort":
			s = fmt.Sprintf("putAddr4(p[%s:%s+4], %s.Addr())\nle.PutUint16(p[o.%s:], %s.Port())\n", m, m, v, f.members[1], v)
		case "Name":
			s = fmt.Sprintf("copy(p[%s:%s+len(%s)], %s[:])\n", m, m, v, v)
		case "Tuple":
			s = fmt.Sprintf("encodeTuple(p[%s:], &%s)\n", m, v)
		}
		return s
	})
	w.printf("}\n\n")
}

func (w *writer) appendCompact(fs []field) {
	w.op("appendCompact", "(b []byte, e *Event) []byte")
	w.each(fs, func(f field, v, _ string) (s string) {
		switch {
		case f.varint:
			s = fmt.Sprintf("b = binary.AppendUvarint(b, %s)\n", conv("uint64", v, f.goType))
		case f.kind == "int" && f.width == 1:
			s = fmt.Sprintf("b = append(b, %s)\n", conv("uint8", v, f.goType))
		case f.kind == "int":
			s = fmt.Sprintf("b = le.AppendUint%d(b, %s)\n", 8*f.width, conv(uintOf[f.width], v, f.goType))
		case f.kind == "Addr":
			s = fmt.Sprintf("b = appendAddr(b, %s)\n", v)
		case f.kind == "AddrPort":
			s = fmt.Sprintf("b = le.AppendUint16(appendAddr(b, %s.Addr()), %s.Port())\n", v, v)
		case f.kind == "Name":
			s = fmt.Sprintf("b = appendName(b, &%s)\n", v)
		case f.kind == "Tuple":
			s = fmt.Sprintf("b = appendTuple(b, &%s)\n", v)
		}
		return s
	})
	w.printf("return b\n}\n\n")
}

func (w *writer) readCompact(fs []field) {
	w.op("readCompact", "(r *compactReader, e *Event)")
	w.each(fs, func(f field, v, _ string) (s string) {
		switch {
		case f.varint:
			s = fmt.Sprintf("%s = %s\n", v, conv(f.goType, "r.uvarint()", "uint64"))
		case f.kind == "int":
			s = fmt.Sprintf("%s = %s\n", v, conv(f.goType, fmt.Sprintf("r.u%d()", 8*f.width), uintOf[f.width]))
		case f.kind == "Addr":
			s = fmt.Sprintf("%s = r.addr()\n", v)
		case f.kind == "AddrPort":
			s = fmt.Sprintf("%s = netip.AddrPortFrom(r.addr(), r.u16())\n", v)
		case f.kind == "Name":
			s = fmt.Sprintf("r.name(&%s)\n", v)
		case f.kind == "Tuple":
			s = fmt.Sprintf("r.tuple(&%s)\n", v)
		}
		return s
	})
	w.printf("}\n\n")
}

// addrs writes addrs and setAddr: the payload's addresses in field order,
// a tuple's source and destination, an address and port's address.
func (w *writer) addrs(fs []field) {
	var get, set []string
	for _, f := range fs {
		v := w.ev + "." + f.name
		switch f.kind {
		case "Addr":
			get, set = append(get, v), append(set, fmt.Sprintf("%s = a", v))
		case "Tuple":
			get = append(get, v+".Src", v+".Dst")
			set = append(set, fmt.Sprintf("%s.Src = a", v), fmt.Sprintf("%s.Dst = a", v))
		case "AddrPort":
			get, set = append(get, v+".Addr()"), append(set, fmt.Sprintf("%s = netip.AddrPortFrom(a, %s.Port())", v, v))
		}
	}
	w.op("addrs", "(e *Event) (a [payloadAddrs]netip.Addr)")
	for i, g := range get {
		w.printf("a[%d] = %s\n", i, g)
	}
	w.printf("return a\n}\n\n")
	w.op("setAddr", "(e *Event, i int, a netip.Addr)")
	if len(set) > 0 {
		w.printf("switch i {\n")
		for i, s := range set {
			w.printf("case %d:\n%s\n", i, s)
		}
		w.printf("}\n")
	}
	w.printf("}\n\n")
}
