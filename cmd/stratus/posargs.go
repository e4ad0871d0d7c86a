package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// positional checks a command's positional arguments against the names
// its Use line gives them ("logs RUN [NODE] [--dir DIR]": RUN required,
// NODE optional), so a missing or extra argument is a usage error (exit 2)
// that names what is missing and shows the usage line, never cobra's
// "accepts 1 arg(s), received 0".
func positional() cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		required, optional := argNames(cmd.Use)
		usage := "usage: " + cmd.CommandPath() + strings.TrimPrefix(cmd.Use, cmd.Name())
		switch {
		case len(args) < len(required):
			missing := required[len(args):]
			return usageError{fmt.Errorf("missing %s (%s)", strings.Join(missing, " and "), usage)}
		case len(args) > len(required)+len(optional):
			extra := args[len(required)+len(optional):]
			return usageError{fmt.Errorf("unexpected argument %q: %s takes %s (%s)", extra[0], cmd.Name(), describeArgs(required, optional), usage)}
		}
		return nil
	}
}

// argNames reads the positional names of a Use line: the words after the
// command's name up to the first flag, "NAME" required, "[NAME]" optional.
func argNames(use string) (required, optional []string) {
	fields := strings.Fields(use)
	for _, f := range fields[1:] {
		name := strings.Trim(f, "[]")
		if strings.HasPrefix(name, "-") || name == "|" || strings.Contains(name, "...") {
			break
		}
		if strings.HasPrefix(f, "[") {
			optional = append(optional, name)
		} else {
			required = append(required, name)
		}
	}
	return required, optional
}

func describeArgs(required, optional []string) string {
	var parts []string
	if len(required) > 0 {
		parts = append(parts, strings.Join(required, " "))
	}
	if len(optional) > 0 {
		parts = append(parts, "and optionally "+strings.Join(optional, " "))
	}
	if len(parts) == 0 {
		return "no arguments"
	}
	return strings.Join(parts, " ")
}
