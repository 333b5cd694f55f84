package mesh

import "net"

// tune sets TCP_NODELAY and the socket buffers of a data connection. Large
// buffers let a sender hand the kernel a whole segment per system call;
// the kernel caps them at net.core.wmem_max / rmem_max. Errors are
// ignored: tuning is an optimisation.
func tune(conn net.Conn, buf int) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if buf <= 0 {
		return
	}
	type buffered interface {
		SetReadBuffer(int) error
		SetWriteBuffer(int) error
	}
	if bc, ok := conn.(buffered); ok {
		_ = bc.SetWriteBuffer(buf)
		_ = bc.SetReadBuffer(buf)
	}
}
