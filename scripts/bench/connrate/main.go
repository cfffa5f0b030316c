// Command connrate measures short-connection rate: it connects to ADDR,
// reads the server's one-line answer, closes, and repeats for a duration,
// then prints connections per second. Run it inside a namespace with
// `ip netns exec`. Connections end with a reset (SO_LINGER 0): a FIN close
// leaves the client port in TIME_WAIT in conntrack, and a later connection
// that picks the same port stalls on a 1 s SYN retransmit, which made the
// rate vary tenfold between rounds.
//
// -workers connect in parallel; -rate paces them all together to that many
// connections a second (0: as fast as they go). A connection that fails is
// counted, on stderr, and not in the rate.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "", "server address:port")
	d := flag.Duration("d", 3*time.Second, "how long to run")
	workers := flag.Int("workers", 1, "connections made in parallel")
	rate := flag.Float64("rate", 0, "connections a second, all workers together (0: full speed)")
	flag.Parse()
	var ok, failed atomic.Int64
	start := time.Now()
	end := start.Add(*d)
	var next atomic.Int64 // the number of the next paced connection
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for {
				if *rate > 0 {
					due := start.Add(time.Duration(float64(next.Add(1)-1) / *rate * float64(time.Second)))
					time.Sleep(time.Until(due))
				}
				if time.Now().After(end) {
					return
				}
				if connect(*addr) {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("%.0f\n", float64(ok.Load())/time.Since(start).Seconds())
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "connrate: %d connections failed\n", n)
	}
}

// connect makes one connection and reads the answer.
func connect(addr string) bool {
	c, err := net.DialTimeout("tcp4", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.(*net.TCPConn).SetLinger(0)
	c.SetDeadline(time.Now().Add(time.Second))
	_, err = bufio.NewReader(c).ReadString('\n')
	return err == nil
}
