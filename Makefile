# nettrace: build, test and demo. Targets that load BPF programs need root.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH):/usr/sbin:/sbin

BIN := bin/nettrace
LAB := bin/ntlab
BPF_SRC := $(wildcard bpf/*.bpf.c bpf/include/*.h) vmlinux.h
BPF_GEN := internal/probe/nat_bpfel.go

.PHONY: all deps generate build test unit-test fuzz integration-test demo lab-down vmlinux clean

all: build

deps:
	@scripts/deps.sh

$(BPF_GEN): $(BPF_SRC) internal/probe/gen.go
	cd internal/probe && go generate ./...

generate: deps $(BPF_GEN)

build: generate
	go build -o $(BIN) ./cmd/nettrace
	go build -o $(LAB) ./test/lab/ntlab

# Regenerate vmlinux.h from the running kernel's BTF. CO-RE relocates the
# programs on other kernels, so this is needed only for new kernel types.
vmlinux:
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h

unit-test: generate
	go vet ./...
	go test -count=1 ./pkg/... ./internal/...

integration-test: generate
	go test -count=1 -v ./test/...

fuzz: generate
	scripts/fuzz.sh

test: unit-test fuzz integration-test

demo: build
	scripts/demo.sh $(BIN) $(LAB)

# Removes whatever a lab run left (namespaces, servers).
lab-down: build
	$(LAB) down

clean:
	rm -rf bin internal/probe/*_bpfel.go internal/probe/*_bpfel.o
