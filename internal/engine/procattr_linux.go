package engine

import "syscall"

// cliProcAttr keeps a wrapped CLI in the shim's own process group, the
// engine's group the runner created (docs/contracts.md § Process lifecycle),
// so when the runner kills that group the CLI and every tool it spawned go
// with it; on Linux the kernel also kills the CLI if the shim dies first.
func cliProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
