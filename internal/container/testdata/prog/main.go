// Command prog is the one program of the image internal/container's tests
// run: a static binary in an otherwise empty image. Its arguments are
// steps run in order:
//
//	print:TEXT  print TEXT on stdout
//	stderr:TEXT print TEXT on stderr
//	env:NAME    print NAME=value (or NAME unset) on stdout
//	uid         print uid=N on stdout
//	cat:PATH    print the file at PATH on stdout
//	write:PATH  write "x" to PATH, printing "wrote" or the error
//	lines:N     print "line 1" … "line N" on stdout
//	waitterm    print "ready", then wait for SIGTERM and print "terminated"
//	ignoreterm  print "ready", then ignore SIGTERM and sleep
//	exit:N      exit with status N
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	for _, arg := range os.Args[1:] {
		step, val, _ := strings.Cut(arg, ":")
		switch step {
		case "print":
			fmt.Println(val)
		case "stderr":
			fmt.Fprintln(os.Stderr, val)
		case "env":
			if v, ok := os.LookupEnv(val); ok {
				fmt.Printf("%s=%s\n", val, v)
			} else {
				fmt.Printf("%s unset\n", val)
			}
		case "uid":
			fmt.Printf("uid=%d\n", os.Getuid())
		case "cat":
			b, err := os.ReadFile(val)
			if err != nil {
				fmt.Println(err)
				continue
			}
			fmt.Print(string(b))
		case "write":
			if err := os.WriteFile(val, []byte("x"), 0o644); err != nil {
				fmt.Println("write:", err)
			} else {
				fmt.Println("wrote")
			}
		case "lines":
			n, _ := strconv.Atoi(val)
			for i := 1; i <= n; i++ {
				fmt.Printf("line %d\n", i)
			}
		case "waitterm":
			c := make(chan os.Signal, 1)
			signal.Notify(c, syscall.SIGTERM)
			fmt.Println("ready")
			<-c
			fmt.Println("terminated")
		case "ignoreterm":
			signal.Ignore(syscall.SIGTERM)
			fmt.Println("ready")
			time.Sleep(time.Hour)
		case "exit":
			n, _ := strconv.Atoi(val)
			os.Exit(n)
		default:
			fmt.Fprintf(os.Stderr, "prog: unknown step %q\n", arg)
			os.Exit(2)
		}
	}
}
