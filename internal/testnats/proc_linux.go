package testnats

import "syscall"

// procAttr makes the kernel kill a nats-server process when the test
// process that started it dies (a crash, a test timeout), so that no
// server outlives its test even when t.Cleanup does not run. The signal
// follows the thread that started the process; Go ends such a thread only
// when a goroutine locked to it exits, which the tests here never do.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
