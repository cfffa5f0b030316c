// Command ntlab builds nettrace's incident lab: ntlab up SCENARIO, ntlab
// traffic SCENARIO, ntlab down (and ntlab serve, which up runs in pods, and
// ntlab queue, which up runs in a node for the conntrack-clash scenario).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/test/lab"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  ntlab up SCENARIO        build the lab for SCENARIO (replacing any lab up)
  ntlab traffic SCENARIO   drive the scenario's clients, print what they saw
  ntlab noise [DURATION [CONNS]]
                           background traffic between the lab's pods
                           (default 3s and 400 TCP connections)
  ntlab down               remove every lab namespace and server
  ntlab list               list the scenarios
  ntlab cluster up [--proxy-mode iptables|nftables]
                           a real Kubernetes cluster of two nodes; prints
                           its kubeconfig's path (make kube builds it)
  ntlab cluster down       remove the cluster

scenarios: %s
`, strings.Join(lab.Names(), ", "))
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "ntlab: %v\n", err)
		os.Exit(1)
	}
}

func run(cmd string, args []string) error {
	if cmd != "list" && os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces)")
	}
	switch cmd {
	case "up", "traffic":
		if len(args) != 1 {
			usage()
			os.Exit(2)
		}
		if cmd == "up" {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			sc, err := lab.Up(args[0], self)
			if err != nil {
				return err
			}
			fmt.Printf("lab up: %s: %s\n", sc.Name, sc.Description)
			return nil
		}
		sc, err := lab.Lookup(args[0])
		if err != nil {
			return err
		}
		outs, err := lab.Traffic(sc)
		if err != nil {
			return err
		}
		for _, o := range outs {
			fmt.Println(o)
		}
		return nil
	case "noise":
		cfg := lab.DefaultNoise
		if len(args) > 0 {
			d, err := time.ParseDuration(args[0])
			if err != nil {
				return fmt.Errorf("noise duration: %w", err)
			}
			cfg.Duration = d
		}
		if len(args) > 1 {
			n, err := strconv.Atoi(args[1])
			if err != nil || n <= 0 {
				return fmt.Errorf("noise connections: %q is not a positive number", args[1])
			}
			cfg.MaxConns = n
		}
		rep, err := lab.Noise(context.Background(), cfg)
		if err != nil {
			return err
		}
		fmt.Println("noise:", rep)
		return nil
	case "down":
		return lab.Down()
	case "list":
		for _, n := range lab.Names() {
			sc, _ := lab.Lookup(n)
			fmt.Printf("%-24s %s\n", n, sc.Description)
		}
		return nil
	case "cluster":
		return clusterCmd(args)
	case "serve":
		return serve(args)
	case "queue":
		fs := flag.NewFlagSet("queue", flag.ExitOnError)
		num := fs.Uint("num", 0, "netfilter queue number")
		holdFirst := fs.Bool("hold-first", false, "hold the first packet until the second has passed")
		delay := fs.Duration("delay", 0, "accept each packet this long after it came")
		ready := fs.String("ready-file", "", "created once the queue is bound")
		fs.Parse(args)
		return lab.ServeQueue(uint16(*num), *holdFirst, *delay, *ready)
	}
	usage()
	os.Exit(2)
	return nil
}

// serve is `ntlab serve`: a pod's server (lab.Serve).
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "", "address:port to listen on")
	name := fs.String("name", "", "name to answer with")
	backlog := fs.Int("backlog", 0, "listen backlog (0: 4096)")
	noAccept := fs.Bool("no-accept", false, "never accept: connections stay in the accept queue")
	hold := fs.Bool("hold", false, "keep each connection open after the answer until the client closes it")
	bulk := fs.Int("bulk", 0, "answer with this many bytes more after the name, in one line")
	udp := fs.Bool("udp", false, "answer each UDP datagram with the name instead")
	ready := fs.String("ready-file", "", "created once listening")
	fs.Parse(args)
	if *udp {
		return lab.ServeUDP(*addr, *name, *ready)
	}
	return lab.Serve(*addr, lab.ServeOptions{Name: *name, Backlog: *backlog, NoAccept: *noAccept, Hold: *hold, Bulk: *bulk, ReadyFile: *ready})
}
