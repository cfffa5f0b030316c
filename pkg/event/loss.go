package event

// LossWindow says that N records the kernel made between From and To
// (kernel time) never reached user space: the ring buffer was full, or the
// tracer shed them to keep room for evidence of failure. Which records is
// unknown, so every flow open during the window may lack some.
type LossWindow struct {
	From, To uint64
	N        uint64
}
