package estimate

import (
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"
)

// lazyCodec builds one BPE codec on first use and shares it afterwards.
// Building o200k turns its embedded vocabulary into a map, which takes
// about 20-40 ms and 7 MB of heap (cl100k: 12-20 ms, 3.5 MB), so it happens
// once per process and only for the encodings a process counts with.
//
// The constructors are called directly rather than through tokenizer.Get:
// Get references every encoding the module ships, which links the r50k and
// p50k tables too, for no use.
type lazyCodec struct {
	load  func() *codec.Codec
	once  sync.Once
	codec *codec.Codec
	seen  countCache
}

// The two shared codecs. These are the package's only package-level values:
// each is written once, under its sync.Once, and only read after that, like
// a compiled regexp. Every Estimator for the same encoding shares one.
var (
	o200kCodec  = &lazyCodec{load: codec.NewO200kBase}
	cl100kCodec = &lazyCodec{load: codec.NewCl100kBase}
)

// codecFor returns the shared codec for an encoding name, or nil for
// CharBased, which needs none.
func codecFor(encoding string) *lazyCodec {
	switch encoding {
	case O200kBase:
		return o200kCodec
	case Cl100kBase:
		return cl100kCodec
	}
	return nil
}

// count returns the token count of s: exact, except inside whitespace runs
// longer than maxSpaceRun (see chunks). It fails only if the codec's split
// pattern errs; callers then fall back to charTokens rather than report an
// error, because an estimate is still better than none.
//
// The codec is safe for concurrent use as long as nobody calls SetErrorMode,
// which this package never does: Count only reads the vocabulary map, and
// the regexp2 pattern is documented as safe for concurrent use.
func (l *lazyCodec) count(s string) (int, error) {
	l.once.Do(func() { l.codec = l.load() })
	if n, ok := l.seen.get(s); ok {
		return n, nil
	}
	n, err := chunks(s, l.codec.Count)
	if err == nil {
		l.seen.put(s, n)
	}
	return n, err
}

// Texts from minCachedText to maxCachedText bytes have their counts
// remembered: a tool schema's many property names and descriptions too,
// which cost a tokenizer pass each. Each entry is charged entryOverhead
// bytes besides its text, so that many short texts are bounded too.
const (
	minCachedText   = 8
	maxCachedText   = 64 << 10
	entryOverhead   = 64
	cacheGeneration = 2 << 20 // bytes charged to one generation
)

// countCache remembers the counts of texts counted lately. A chat call
// resends its whole conversation, system prompt and tools each turn, and
// counting 2 KB with the BPE tokenizer takes about 200 µs and 2,000
// allocations, on the way to the call's Acquire (issue 22). A count depends
// on the text only, so a remembered count is the same answer.
//
// It holds two generations: when the newer one reaches cacheGeneration
// bytes, the older is dropped and the newer takes its place, so memory is
// bounded (about 2 × cacheGeneration) and a text in use stays.
type countCache struct {
	mu           sync.Mutex
	recent, prev map[string]int
	held         int // bytes charged to recent
}

func (c *countCache) get(s string) (int, bool) {
	if len(s) < minCachedText || len(s) > maxCachedText {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.recent[s]; ok {
		return n, true
	}
	n, ok := c.prev[s]
	if ok { // still in use: kept into the next generation, as a copy (see put)
		c.add(strings.Clone(s), n)
	}
	return n, ok
}

func (c *countCache) put(s string, n int) {
	if len(s) < minCachedText || len(s) > maxCachedText {
		return
	}
	// A copy: s may be a slice of a much larger string, which a key would
	// keep alive.
	s = strings.Clone(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(s, n)
}

// add stores s in the newer generation, turning the generations first
// when it is full. c.mu is held.
func (c *countCache) add(s string, n int) {
	if c.recent == nil || c.held+len(s)+entryOverhead > cacheGeneration {
		c.prev, c.recent, c.held = c.recent, make(map[string]int), 0
	}
	c.recent[s] = n
	c.held += len(s) + entryOverhead
}
