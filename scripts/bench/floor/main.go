// Command floor measures what nettrace's attach layout alone costs: it
// opens nettrace's tracer with the same namespaces, notes every program it
// attaches and where, closes it, and attaches an empty program (return at
// once; netfilter ones accept) at each of those places, until SIGINT or
// SIGTERM. A packet then pays every run nettrace would make it pay, with
// none of the work.
//
// Usage: floor [--netns NS]... [--ready-file F]   (root; NS as for nettrace watch)
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/probe"
)

type netnsFlag []string

func (n *netnsFlag) String() string     { return strings.Join(*n, ",") }
func (n *netnsFlag) Set(v string) error { *n = append(*n, v); return nil }

func main() {
	var spaces netnsFlag
	flag.Var(&spaces, "netns", "namespace to watch (repeatable; all: every namespace)")
	ready := flag.String("ready-file", "", "created once every empty program is attached")
	flag.Parse()
	if err := run(spaces, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(spaces []string, ready string) error {
	if len(spaces) == 0 {
		spaces = []string{"all"}
	}
	targets, err := netns.Resolve(spaces)
	if err != nil {
		return err
	}
	syms, err := kernel.LoadSymbols()
	if err != nil {
		return err
	}
	tr, err := probe.Open(probe.Options{Namespaces: targets, SnapLen: 128, Log: zerolog.Nop()}, kernel.Probe(func(string, string) {}), syms)
	if err != nil {
		return err
	}
	layout := tr.Attachments()
	tr.Close()

	var links []link.Link
	defer func() {
		for _, l := range links {
			l.Close()
		}
	}()
	for _, a := range layout {
		l, err := attachEmpty(a)
		if err != nil {
			return fmt.Errorf("%s %s at %s: %w", a.Method, a.Program, a.Target, err)
		}
		links = append(links, l)
	}
	fmt.Fprintf(os.Stderr, "floor: %d empty programs attached where nettrace attaches\n", len(links))
	if ready != "" {
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			return err
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}

// attachEmpty attaches a program that does nothing where a is attached.
func attachEmpty(a probe.Attachment) (link.Link, error) {
	spec := &ebpf.ProgramSpec{Name: "floor", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
	switch a.Method {
	case probe.MethodTpBTF:
		spec.Type, spec.AttachType, spec.AttachTo = ebpf.Tracing, ebpf.AttachTraceRawTp, a.Target
	case probe.MethodNetfilter:
		spec.Type, spec.AttachType = ebpf.Netfilter, ebpf.AttachNetfilter
		spec.Instructions[0] = asm.Mov.Imm(asm.R0, 1) // NF_ACCEPT
	default:
		return nil, fmt.Errorf("method %s has no empty twin here", a.Method)
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	if a.Method == probe.MethodTpBTF {
		return link.AttachTracing(link.TracingOptions{Program: prog})
	}
	// One program per hook, priority and family: the IPv6 twin of a link
	// needs its own family, or it collides with the IPv4 one (EBUSY).
	family := uint32(unix.NFPROTO_IPV4)
	if a.Family == "ipv6" {
		family = unix.NFPROTO_IPV6
	}
	var l link.Link
	err = netns.Do(a.Target, func() error {
		l, err = link.AttachNetfilter(link.NetfilterOptions{Program: prog, ProtocolFamily: family,
			HookNumber: a.Hook, Priority: a.Priority})
		return err
	})
	return l, err
}
