package trace

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// A pod address record is every pod address the recording host knew when
// it was written (a JSON object, address to namespace/name): it replaces
// the one before, so a pod gone or an address given to another pod is
// named as the host named it from then on. A node address record is the
// same of nodes (address to node name).

// addressBook is one kind of address names a recording carries, as its
// last record of that kind has them, and a generation counting those
// records. The map is replaced, never changed.
type addressBook struct {
	gen   uint64
	names map[netip.Addr]string
}

func encodeAddresses(names map[netip.Addr]string) []byte {
	js, _ := json.Marshal(names) // netip.Addr is a text key: cannot fail
	return js
}

func decodeAddresses(p []byte) (map[netip.Addr]string, error) {
	var names map[netip.Addr]string
	if err := json.Unmarshal(p, &names); err != nil {
		return nil, fmt.Errorf("unreadable: %w", err)
	}
	return names, nil
}
