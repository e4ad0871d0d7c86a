//go:build !linux

package container

import "syscall"

// serviceProcAttr: without Linux's parent-death signal, a started podman
// service ends at Close (or at its own idle timeout).
func serviceProcAttr() *syscall.SysProcAttr { return nil }
