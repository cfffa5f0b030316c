// Command connrate measures short-connection rate: it connects to ADDR,
// reads the server's one-line answer, closes, and repeats for a duration,
// then prints connections per second. Run it inside a namespace with
// `ip netns exec`. Connections end with a reset (SO_LINGER 0): a FIN close
// leaves the client port in TIME_WAIT in conntrack, and a later connection
// that picks the same port stalls on a 1 s SYN retransmit, which made the
// rate vary tenfold between rounds.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "", "server address:port")
	d := flag.Duration("d", 3*time.Second, "how long to run")
	flag.Parse()
	n, failed := 0, 0
	end := time.Now().Add(*d)
	start := time.Now()
	for time.Now().Before(end) {
		c, err := net.DialTimeout("tcp4", *addr, time.Second)
		if err != nil {
			failed++
			continue
		}
		c.(*net.TCPConn).SetLinger(0)
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			failed++
		} else {
			n++
		}
		c.Close()
	}
	rate := float64(n) / time.Since(start).Seconds()
	fmt.Printf("%.0f\n", rate)
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "connrate: %d connections failed\n", failed)
	}
}
