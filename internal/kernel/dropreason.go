package kernel

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// DropReasons names the running kernel's enum skb_drop_reason values. The
// numbers differ between kernels, so they are read from this kernel's BTF
// and never from a table compiled into nettrace.
func DropReasons() (map[uint32]string, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("load kernel BTF: %w", err)
	}
	var enum *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &enum); err != nil {
		return nil, fmt.Errorf("find enum skb_drop_reason in kernel BTF: %w", err)
	}
	names := make(map[uint32]string, len(enum.Values))
	for _, v := range enum.Values {
		names[uint32(v.Value)] = strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
	}
	return names, nil
}
