package probe

import (
	"crypto/sha256"
	"encoding/hex"
)

// ObjectsHash identifies the BPF objects built into this binary: the
// first 12 hex digits of the SHA-256 of every object, in the order bpfgen
// builds them. Two binaries with the same hash load the same programs,
// whatever their Go code (nettrace --version).
func ObjectsHash() string {
	h := sha256.New()
	for _, obj := range objects {
		h.Write(obj)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
