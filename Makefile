# nettrace: build, test and demo. Targets that load BPF programs need root.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH):/usr/sbin:/sbin

BIN := bin/nettrace
LAB := bin/ntlab
BPF_SRC := $(wildcard bpf/*.bpf.c bpf/include/*.h) vmlinux.h
BPF_GEN := internal/probe/nat_x86_bpfel.go

.PHONY: all deps generate build image flanneld kube test unit-test fuzz integration-test vmtest vmtest-nightly demo lab-down vmlinux clean

# Kernels the VM stage boots, all at once (scripts/vmtest/matrix.sh):
# KERNEL[:SUITES], KERNEL a Debian series (the newest package of it), a
# package name or a bzImage path; SUITES as scripts/vmtest/run.sh lists
# them. 6.1 runs the captures and most of the IPv4 busy lab with each
# point's preferred method; 6.12, whose kernel allows every method of every
# point, compares the methods and runs the IPv6 busy lab and the rest of
# the IPv4 one, so that both guests take about as long: the stage lasts as
# long as its slower guest, and a TCG guest left alone uses one core of
# two (on ae9da27's slow CI day, 6.1 took 2,633 s and 6.12 1,430 s, with
# the IPv4 busy lab's fifteen incidents 1,046 s of 6.1's). Adding a kernel
# is one word (its suites are all).
VM_KERNELS ?= 6.1:captures,busy-v4 6.12:methods,busy-v6,busy-v4-more
# Then two guests of 6.12 as the lab's two nodes, linked to each other only
# (TestTwoKernels), once the others are done: beside them, four guests on
# two cores slowed the methods comparison's last-resort SYN method (user
# space, sock_diag) until it named a background connection (issue 32's
# closing note).
VM_PAIRS ?= 6.12:pair
# Beside the pair, an arm64 guest (qemu-system-aarch64, TCG) proves the
# arm64 build: the probes and incidents 000 and 003 with a healthy twin
# (suite smoke); its other suites run nightly.
VM_ARM64 ?= 6.12-arm64:smoke
# Other flavours, and every suite on arm64, outside CI.
VM_NIGHTLY_KERNELS ?= $(shell apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64$$' 2>/dev/null | awk '{print $$1}' | sort -V | tail -1) 6.12-arm64

all: build

deps:
	@scripts/deps.sh

$(BPF_GEN): $(BPF_SRC) internal/probe/gen.go internal/probe/internal/bpfgen/main.go
	cd internal/probe && go generate ./...

generate: deps $(BPF_GEN)

build: generate
	go build -buildvcs=auto -o $(BIN) ./cmd/nettrace
	# Static: the cluster lab's pods run it from an image of its own.
	CGO_ENABLED=0 go build -o $(LAB) ./test/lab/ntlab

# nettrace's container image, built offline with podman for amd64 and
# arm64 under one manifest list (scripts/image.sh says what it holds);
# deploy/ runs it.
IMAGE ?= nettrace:dev
image: generate
	scripts/image.sh $(IMAGE)

# flanneld from flannel's own module, for the test that runs incident 1 on
# flannel itself (scripts/flanneld.sh says what it changes).
flanneld: deps
	scripts/flanneld.sh bin/flanneld

# The Kubernetes components (v1.37.2, built from k8s.io/kubernetes through
# the module proxy: scripts/kube.sh) and flannel's CNI plugin, for the
# cluster lab (`ntlab cluster up`, test/cluster_test.go). Cold, 25 CPU-minutes
# (about 13 on this machine's two cores); kept in .cache/ after.
KUBE_DIR := .cache/kube
kube: deps
	scripts/kube.sh $(KUBE_DIR)
	scripts/flannel-cni.sh .cache/cni/flannel

# Regenerate vmlinux.h from the running kernel's BTF. CO-RE relocates the
# programs on other kernels, so this is needed only for new kernel types.
vmlinux:
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h

unit-test: generate
	scripts/check-tracked.sh
	go vet ./...
	go test -count=1 ./pkg/... ./internal/...
	# The packages where goroutines hand flows and names to each other.
	go test -count=1 -race ./internal/engine/ ./pkg/flow/ ./pkg/trace/

# The host's integration tests take about 24 minutes here (1,438 s in a
# warm CI run); each of scripts/integration.sh's two go test runs has the
# timeout (go test's default is 10), which leaves room for a machine three
# times slower. It builds the Kubernetes components (`make kube`) beside
# the tests that do not need them.
INTEGRATION_TIMEOUT ?= 40m
export INTEGRATION_TIMEOUT
integration-test: generate flanneld
	scripts/integration.sh

fuzz: generate
	scripts/fuzz.sh

# Boots the kernels under qemu and runs the integration tests there, where
# kprobes and fentry are allowed (scripts/vmtest/run.sh).
vmtest: deps flanneld
	scripts/vmtest/matrix.sh $(VM_KERNELS)
	scripts/vmtest/matrix.sh $(VM_PAIRS) $(VM_ARM64)

vmtest-nightly: deps
	for k in $(VM_NIGHTLY_KERNELS); do scripts/vmtest/run.sh $$k || exit 1; done

test: unit-test fuzz integration-test vmtest

demo: build
	scripts/demo.sh $(BIN) $(LAB)

# Removes whatever a lab run left (namespaces, servers).
lab-down: build
	$(LAB) down

clean:
	rm -rf bin internal/probe/*_bpfel.go internal/probe/*_bpfel.o
