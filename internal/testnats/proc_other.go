//go:build !linux

package testnats

import "syscall"

// procAttr is nil where the kernel cannot kill a child with its parent:
// there only t.Cleanup stops the servers.
func procAttr() *syscall.SysProcAttr { return nil }
