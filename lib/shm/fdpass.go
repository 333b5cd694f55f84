package shm

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// MaxFDs is the most descriptors one message may carry (RecvMsg closes any
// beyond it: the kernel truncates the control data).
const MaxFDs = 4

// SendFD writes b on c with fd attached (SCM_RIGHTS): the receiver gets its
// own descriptor of the same file with the first byte of b.
func SendFD(c *net.UnixConn, b []byte, fd int) error {
	if len(b) == 0 {
		return fmt.Errorf("shm: a descriptor must travel with at least one byte")
	}
	n, oobn, err := c.WriteMsgUnix(b, unix.UnixRights(fd), nil)
	if err != nil {
		return fmt.Errorf("shm: send descriptor: %w", err)
	}
	if n != len(b) || oobn == 0 {
		return fmt.Errorf("shm: send descriptor: %d of %d bytes written", n, len(b))
	}
	return nil
}

// RecvMsg reads into b from c, like Read, and returns the descriptors that
// arrived with those bytes (this process owns them: close them).
func RecvMsg(c *net.UnixConn, b []byte) (n int, fds []int, err error) {
	oob := make([]byte, unix.CmsgSpace(4*MaxFDs))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if oobn > 0 {
		fds, perr := parseRights(oob[:oobn])
		if perr != nil && err == nil {
			err = perr
		}
		return n, fds, err
	}
	return n, nil, err
}

// parseRights returns every descriptor in the control messages.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("shm: control message: %w", err)
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue // not SCM_RIGHTS
		}
		fds = append(fds, got...)
	}
	return fds, nil
}
