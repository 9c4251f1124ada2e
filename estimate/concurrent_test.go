package estimate

import (
	"sync"
	"testing"

	"github.com/tiktoken-go/tokenizer/codec"
)

// TestConcurrentUse runs many goroutines through Estimators that share
// codecs, including the first, lazy load, and checks that every one gets
// the single-goroutine answer. Run it with -race.
func TestConcurrentUse(t *testing.T) {
	// Fresh codecs, so that the race detector also sees concurrent first
	// loads even when other tests have loaded the shared ones already.
	fresh := map[string]*lazyCodec{
		O200kBase:  {load: codec.NewO200kBase},
		Cl100kBase: {load: codec.NewCl100kBase},
		CharBased:  nil,
	}
	scs := scenarios()
	for enc, codec := range fresh {
		e := &Estimator{encoding: enc, codec: codec, marginBP: 500}
		want := make([]int64, len(scs))
		ref := &Estimator{encoding: enc, codec: codecFor(enc), marginBP: 500}
		for i, sc := range scs {
			want[i] = ref.reserve(ref.prompt(sc.msgs, sc.tools), 100)
		}

		const goroutines = 16
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for j := range len(scs) {
					i := (g + j) % len(scs)
					got, err := e.Estimate(Request{Messages: scs[i].msgs, Tools: scs[i].tools, MaxOutput: 100})
					if err != nil || got != want[i] {
						t.Errorf("%s goroutine %d: Estimate(%s) = %d, %v, want %d", enc, g, scs[i].name, got, err, want[i])
					}
				}
			})
		}
		wg.Wait()
	}
}
