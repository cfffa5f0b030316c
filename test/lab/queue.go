package lab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nfnetlink_queue's protocol (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue = 3
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2
	nfqaPacketHdr   = 1
	nfqaVerdictHdr  = 2
	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1
	nfAccept        = 1
	nfgenmsgLen     = 4
)

// ServeQueue binds netfilter queue num and accepts every packet queued
// there, each delay after it came. With holdFirst it sets up a conntrack
// clash: it holds the first packet until the second arrives, accepts the
// second (conntrack confirms its entry as it leaves) and then the first,
// whose own entry, created before the second's existed, clashes at
// confirmation. It runs until killed, creating readyFile once bound.
//
// A queue is where a packet can wait between conntrack creating its entry
// and confirming it: what the kernel's scheduling does at random on a
// busy node, made certain. Older kernels (6.1 among them) resolve the
// clash when the queue gives the packet back (nf_conntrack_update attaches
// it to the entry confirmed meanwhile): there nothing is dropped.
func ServeQueue(num uint16, holdFirst bool, delay time.Duration, readyFile string) error {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return fmt.Errorf("netfilter queue %d: %w", num, err)
	}
	defer c.Close()
	bind := netlink.NewAttributeEncoder()
	bind.Bytes(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0})
	// Metadata only: the packet's id is all a verdict needs.
	bind.Bytes(nfqaCfgParams, []byte{0, 0, 0, 0, nfqnlCopyMeta})
	if err := queueMessage(c, num, nfqnlMsgConfig, bind, netlink.Acknowledge); err != nil {
		return fmt.Errorf("bind netfilter queue %d: %w", num, err)
	}
	if err := os.WriteFile(readyFile, nil, 0o644); err != nil {
		return err
	}
	var first uint32
	queued := 0
	// The delayed verdicts are sent from timers, beside the receive loop's.
	var mu sync.Mutex
	verdict := func(id uint32) error {
		mu.Lock()
		defer mu.Unlock()
		return accept(c, num, id)
	}
	late := make(chan error, 1)
	for {
		msgs, err := c.Receive()
		if errors.Is(err, unix.ENOENT) {
			// The kernel's answer to a verdict for a packet it no longer
			// holds: a netfilter hook unregistered in the namespace (a
			// tracer relinking its programs) drops every queued packet
			// (nfqnl_nf_hook_drop), as a loaded node may. Its sender sends
			// it again, and that copy is queued and delayed in turn.
			fmt.Fprintf(os.Stderr, "ntlab: netfilter queue %d: a verdict for a packet the kernel had dropped from the queue (%v); serving on\n", num, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("netfilter queue %d: %w", num, err)
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(nfnlSubsysQueue<<8|nfqnlMsgPacket) {
				continue
			}
			id, err := packetID(m.Data)
			if err != nil {
				return fmt.Errorf("netfilter queue %d: %w", num, err)
			}
			queued++
			if delay > 0 {
				time.AfterFunc(delay, func() {
					if err := verdict(id); err != nil {
						select {
						case late <- err:
						default:
						}
					}
				})
				select {
				case err := <-late:
					return fmt.Errorf("netfilter queue %d: %w", num, err)
				default:
				}
				continue
			}
			if holdFirst && queued == 1 {
				first = id
				continue
			}
			if err := verdict(id); err != nil {
				return fmt.Errorf("netfilter queue %d: %w", num, err)
			}
			if holdFirst && queued == 2 {
				if err := verdict(first); err != nil {
					return fmt.Errorf("netfilter queue %d: %w", num, err)
				}
			}
		}
	}
}

// packetID reads the id of a queued packet, which its verdict names.
func packetID(data []byte) (uint32, error) {
	if len(data) < nfgenmsgLen {
		return 0, errors.New("short queue message")
	}
	ad, err := netlink.NewAttributeDecoder(data[nfgenmsgLen:])
	if err != nil {
		return 0, err
	}
	for ad.Next() {
		if ad.Type() == nfqaPacketHdr && len(ad.Bytes()) >= 4 {
			return binary.BigEndian.Uint32(ad.Bytes()), nil
		}
	}
	if err := ad.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("queued packet without a header")
}

func accept(c *netlink.Conn, num uint16, id uint32) error {
	v := netlink.NewAttributeEncoder()
	hdr := make([]byte, 8)
	binary.BigEndian.PutUint32(hdr, nfAccept)
	binary.BigEndian.PutUint32(hdr[4:], id)
	v.Bytes(nfqaVerdictHdr, hdr)
	return queueMessage(c, num, nfqnlMsgVerdict, v, 0)
}

// queueMessage sends one nfnetlink_queue message for queue num; with
// netlink.Acknowledge it waits for the kernel's answer.
func queueMessage(c *netlink.Conn, num uint16, msg int, attrs *netlink.AttributeEncoder, flags netlink.HeaderFlags) error {
	b, err := attrs.Encode()
	if err != nil {
		return err
	}
	data := make([]byte, nfgenmsgLen, nfgenmsgLen+len(b))
	data[0] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(data[2:], num)
	m := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysQueue<<8 | msg), Flags: netlink.Request | flags},
		Data:   append(data, b...),
	}
	if flags&netlink.Acknowledge != 0 {
		_, err = c.Execute(m)
		return err
	}
	_, err = c.Send(m)
	return err
}
