package trace

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// A pod address record is every pod address the recording host knew when
// it was written (a JSON object, address to namespace/name): it replaces
// the one before, so a pod gone or an address given to another pod is
// named as the host named it from then on.

func encodePods(pods map[netip.Addr]string) []byte {
	js, _ := json.Marshal(pods) // netip.Addr is a text key: cannot fail
	return js
}

func decodePods(p []byte) (map[netip.Addr]string, error) {
	var pods map[netip.Addr]string
	if err := json.Unmarshal(p, &pods); err != nil {
		return nil, fmt.Errorf("unreadable: %w", err)
	}
	return pods, nil
}
