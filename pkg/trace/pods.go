package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/nettrace-dev/nettrace/pkg/service"
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

// serviceBook is the Service frontends a recording carries, as its last
// record of them has them, and a generation counting those records.
type serviceBook struct {
	gen   uint64
	table *service.Table
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

// A service frontend record is every Service frontend the recording host
// knew when it was written (service.Frontend, a JSON array, deflated: a
// large cluster's run to megabytes of repetitive text); it replaces the
// one before, as an address record does.

func encodeServices(t *service.Table) ([]byte, error) {
	js, err := json.Marshal(t.Frontends())
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := deflate(&b, string(js)); err != nil {
		return nil, err
	}
	if b.Len() > maxRulesetRecord {
		return nil, fmt.Errorf("%d Service frontends: %d bytes deflated, more than a recording holds", t.Len(), b.Len())
	}
	return b.Bytes(), nil
}

// decodeServices decodes a service frontend record that may inflate to at
// most limit bytes.
func decodeServices(p []byte, limit int64) (*service.Table, int, error) {
	js, err := inflate(p, limit)
	if err != nil {
		return nil, 0, err
	}
	var frontends []service.Frontend
	if err := json.Unmarshal([]byte(js), &frontends); err != nil {
		return nil, 0, fmt.Errorf("unreadable: %w", err)
	}
	return service.NewTable(frontends), len(js), nil
}
