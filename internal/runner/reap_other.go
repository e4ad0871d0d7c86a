//go:build !linux

package runner

// BecomeSubreaper does nothing off Linux: Reap finds only direct children.
func BecomeSubreaper() error { return nil }

// ProtectCredentials does nothing off Linux.
func ProtectCredentials() error { return nil }

// DropPrivileges does nothing off Linux.
func DropPrivileges() error { return nil }

// CloseInheritedFiles does nothing off Linux.
func CloseInheritedFiles() error { return nil }

// Reap does nothing off Linux: a step's engine process group is still
// killed when the step ends (internal/contract).
func Reap() {}
