package main

import (
	"crypto/sha1"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/llmpacer/llmpacer/lua"
)

// writeSources writes acquire and settle as a Pacer sends them, and their
// SHA1s (the names EVALSHA runs them by), and the batch scripts' library
// as FUNCTION LOAD loads it (library.lua), for lineprof/lineprof.lua.
func writeSources(dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	shas := ""
	for _, name := range []string{"acquire", "settle"} {
		src := lua.Source(name)
		if err := os.WriteFile(filepath.Join(dir, name+".lua"), []byte(src), 0o644); err != nil {
			return err
		}
		shas += fmt.Sprintf("%s %x\n", name, sha1.Sum([]byte(src)))
	}
	if err := os.WriteFile(filepath.Join(dir, "shas"), []byte(shas), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "library.lua"), []byte(lua.Library), 0o644); err != nil {
		return err
	}
	fmt.Fprint(out, shas)
	return nil
}
