// regexp_check compiles regular expressions with Go's own regexp package, the one the
// Kubernetes API server compiles a CRD schema's `pattern` and CEL's `matches()` with (RE2
// syntax, which differs from Rust's regex and from ECMA-262: no \uXXXX, no lookaround).
//
// Standard input: a JSON array of {"at": "where it is", "pattern": "the expression"}.
// Standard output: one line per expression Go refuses ("at: error"), then a count.
// Exit status: 0 every expression compiled, 1 some did not, 2 unreadable input.
//
// Only Go's standard library, so `go run` needs no module and no network.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

type entry struct {
	At      string `json:"at"`
	Pattern string `json:"pattern"`
}

func main() {
	var entries []entry
	if err := json.NewDecoder(os.Stdin).Decode(&entries); err != nil {
		fmt.Fprintf(os.Stderr, "regexp_check: cannot read the expressions: %v\n", err)
		os.Exit(2)
	}
	refused := 0
	for _, e := range entries {
		if _, err := regexp.Compile(e.Pattern); err != nil {
			refused++
			fmt.Printf("%s: %v\n", e.At, err)
		}
	}
	fmt.Printf("%d compiled, %d refused\n", len(entries)-refused, refused)
	if refused > 0 {
		os.Exit(1)
	}
}
