package estimate

import (
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
	return chunks(s, l.codec.Count)
}
