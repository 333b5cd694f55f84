package cli

import "io"

// Output formats of a verb that writes frames for tools or a report for
// people (--format).
const (
	FormatAuto   = "auto"
	FormatFrames = "frames"
	FormatJSON   = "json"
	FormatTable  = "table"
)

// ResolveFormat is the one rule for --format auto: table when stdout is
// a terminal (the IO's stdout, guarded or not), frames otherwise; any
// other format is itself.
func ResolveFormat(format string, stdout io.Writer) string {
	if format != FormatAuto {
		return format
	}
	if IsTerminal(stdout) {
		return FormatTable
	}
	return FormatFrames
}
