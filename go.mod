module github.com/nettrace-dev/nettrace

go 1.26.8

require github.com/cilium/ebpf v0.20.0

require golang.org/x/sys v0.49.0 // indirect
