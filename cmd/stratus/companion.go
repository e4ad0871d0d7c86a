package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// FullBinary is the file name of the whole stratus. `make build` builds
// bin/stratus slim (-tags slim: without the AWS SDK and the run viewer's
// Markdown renderer, whose package init was most of its start time) and puts
// FullBinary beside it; the slim stratus hands the commands that need what it
// lacks (wantsFull: `--target aws`, `dev aws`, `ui`) to FullBinary with the
// same arguments, environment and standard streams, as git hands `git foo` to
// git-foo. A stratus built without the tag (go build ./cmd/stratus) does
// everything itself and never looks for it.
const FullBinary = "stratus-full"

// wantsFull reports whether args (without the program name) name a
// command the slim build hands to FullBinary: `ui`, `dev aws`, `runner
// pool` (its SQS client), or any
// with `--target aws` (or `--target=aws`) before a "--". A false positive
// costs only the hand-off; a command it misses is handed off when it
// reaches what the slim build lacks (slim.go).
func wantsFull(args []string) bool {
	if len(args) >= 1 && args[0] == "ui" || len(args) >= 2 && (args[0] == "dev" && args[1] == "aws" || args[0] == "runner" && args[1] == "pool") {
		return true
	}
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--target="+TargetAWS, a == "--target" && i+1 < len(args) && args[i+1] == TargetAWS:
			return true
		}
	}
	return false
}

// fullBinary is the path of FullBinary: beside the running executable
// (its symlinks resolved), else on PATH. The error says where it looked
// and how to build it.
func fullBinary() (string, error) {
	var looked []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		p := filepath.Join(filepath.Dir(exe), FullBinary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
		looked = append(looked, filepath.Dir(exe))
	}
	if p, err := exec.LookPath(FullBinary); err == nil {
		return p, nil
	}
	looked = append(looked, "PATH")
	return "", fmt.Errorf("this stratus is the slim build, and %s, which runs --target aws, dev aws, runner pool and ui, is not in %v: "+
		"make build puts it beside bin/stratus (or: go build -o bin/%s ./cmd/stratus)", FullBinary, looked, FullBinary)
}

// handOff replaces this process with FullBinary run with this process's
// arguments: it returns only when that cannot be done, with the reason.
func handOff() error {
	p, err := fullBinary()
	if err != nil {
		return err
	}
	err = syscall.Exec(p, append([]string{p}, os.Args[1:]...), os.Environ())
	return errors.Join(fmt.Errorf("start %s", p), err)
}
