package estimate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer/codec"
)

// A remembered count is the count: the second, cached answer of each text
// equals a fresh codec's, for short, long and chunked texts.
func TestCountCacheSameAnswer(t *testing.T) {
	l := &lazyCodec{load: codec.NewO200kBase}
	plain := &lazyCodec{load: codec.NewO200kBase}
	texts := []string{"hi", "hello there", strings.Repeat("The fare is refundable. ", 40),
		"a" + strings.Repeat(" \n", 100) + "b", strings.Repeat("x", maxCachedText+1)}
	for _, s := range texts {
		plain.once.Do(func() { plain.codec = plain.load() })
		want, err := chunks(s, plain.codec.Count)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			got, err := l.count(s)
			if err != nil || got != want {
				t.Fatalf("count(%.20q) call %d = %d, %v; want %d", s, i, got, err, want)
			}
		}
	}
	if _, ok := l.seen.get("hi"); ok {
		t.Errorf("a text under %d bytes was remembered", minCachedText)
	}
	if _, ok := l.seen.get(texts[2]); !ok {
		t.Errorf("a 1 KB text was not remembered")
	}
}

// The cache holds at most two generations, however many distinct texts
// pass, and a text read in the older generation moves to the newer.
func TestCountCacheBounded(t *testing.T) {
	var c countCache
	text := strings.Repeat("y", 1000)
	c.put("kept text, asked for often", 7)
	for i := range 20_000 {
		c.put(fmt.Sprintf("%d %s", i, text), i)
		if i%1000 == 0 {
			if n, ok := c.get("kept text, asked for often"); !ok || n != 7 {
				t.Fatalf("after %d texts: the text in use was dropped (%d, %v)", i, n, ok)
			}
		}
	}
	per := 1000 + entryOverhead
	if n := len(c.recent) + len(c.prev); n*per > 2*cacheGeneration+2*per {
		t.Fatalf("cache holds %d entries of ~%d bytes: over two generations of %d", n, per, cacheGeneration)
	}
	if c.held > cacheGeneration {
		t.Fatalf("newer generation charged %d bytes, over %d", c.held, cacheGeneration)
	}
}
