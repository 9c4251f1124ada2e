package lua

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// The batch scripts as a Redis function library (Redis 7 and later), for
// servers that have FUNCTION LOAD. A script sent by EVALSHA runs its whole
// text on every call: the prelude's helpers, batch.lua's and the script's
// own are made as closures, and their tables, each time (about 80k
// instructions a call, docs/results.md, issue 23, round 13). Loaded as a
// function, that text runs once, on the function's first call, and each
// call after runs only run: the script's main block. The replies and the
// state written are the EVAL form's: the same text computes them.
//
// The library's text: its first line, then, for each of acquires and
// settles, its EVAL text (Source) as the body of a function that returns
// run, the script's main block (from the line batchMain on) made a
// function, and the function registered under its name.
// KEYS and ARGV are the library's locals, set before each call; the first
// call sees a KEYS of five keys while the text runs once, so that the
// prelude makes the helpers a tenant's call needs (tcover) whatever the
// first call is.
var (
	// LibraryName names the library: "llmpacer_" and h, the first 16
	// hex digits of the SHA-1 of its text after its first line, written
	// with h as 16 zeros. So a server holds each version apart, and a
	// Pacer of one version never runs another's.
	LibraryName string
	// AcquiresFunction and SettlesFunction name the library's two
	// functions (for FCALL): acquires.lua and settles.lua, with their
	// KEYS, ARGV and replies.
	AcquiresFunction, SettlesFunction string
	// Library is the library's text, for FUNCTION LOAD.
	Library string
)

// batchMain begins the main block of acquires.lua and settles.lua: one
// script call's work (see batch.lua).
const batchMain = "-- The main block: one script call's work (see batch.lua).\n"

func init() {
	l, err := LibraryOf(Source("acquires"), Source("settles"))
	if err != nil {
		panic(err) // the shipped texts have their main blocks: see TestLibraryMatchesEvalAcrossCalls
	}
	Library, LibraryName, AcquiresFunction, SettlesFunction = l.Text, l.Name, l.Acquires, l.Settles
}

// A FunctionLibrary is a function library of the batch scripts (see
// Library): its text for FUNCTION LOAD, its name, and its two functions'
// names for FCALL.
type FunctionLibrary struct {
	Text, Name        string
	Acquires, Settles string
}

// LibraryOf returns the library built from the given EVAL texts of
// acquires and settles, as Library is built from Source("acquires") and
// Source("settles"): for tools that measure variants of the scripts. A
// text without the line that begins its main block is an error.
func LibraryOf(acquires, settles string) (FunctionLibrary, error) {
	var body strings.Builder
	body.WriteString("local KEYS, ARGV\n")
	for _, s := range []struct{ name, src string }{{"acquires", acquires}, {"settles", settles}} {
		before, main, ok := strings.Cut(s.src, batchMain)
		if !ok {
			return FunctionLibrary{}, fmt.Errorf("lua: LibraryOf: the %s text has no line %q: it must end with its main block", s.name, strings.TrimSpace(batchMain))
		}
		body.WriteString("local function " + s.name + "Init()\n" + before + "local function run()\n" + main + "end\nreturn run\nend\n")
	}
	// The functions' names hold h, which is hashed as 16 zeros.
	register := func(h string) string {
		var b strings.Builder
		for _, name := range []string{"acquires", "settles"} {
			b.WriteString("local " + name + "\n" +
				"redis.register_function('llmpacer_" + name + "_" + h + "', function(keys, args)\n" +
				"  if not " + name + " then\n" +
				"    KEYS, ARGV = {'', '', '', '', ''}, {}\n" +
				"    " + name + " = " + name + "Init()\n" +
				"  end\n" +
				"  KEYS, ARGV = keys, args\n" +
				"  return " + name + "()\n" +
				"end)\n")
		}
		return b.String()
	}
	sum := sha1.Sum([]byte(body.String() + register("0000000000000000")))
	h := hex.EncodeToString(sum[:8])
	name := "llmpacer_" + h
	return FunctionLibrary{Text: "#!lua name=" + name + "\n" + body.String() + register(h), Name: name,
		Acquires: "llmpacer_acquires_" + h, Settles: "llmpacer_settles_" + h}, nil
}
