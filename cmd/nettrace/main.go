// Command nettrace traces what the Linux kernel does to packets (NAT,
// re-routing, encapsulation, listener queues, drops) and explains it.
package main

import (
	"os"

	"github.com/nettrace-dev/nettrace/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
