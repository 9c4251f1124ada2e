package pacer

import (
	"context"
	"fmt"

	"github.com/llmpacer/llmpacer/internal/wire"
	"github.com/redis/go-redis/v9"
)

// Open returns a Pacer that runs the definition of budget name (under key
// prefix, "llmpacer" if empty) stored in Redis by Define or by a
// process whose Config has a Version. It is for an operator's tools, which
// know a budget by its name and have no process's Config: its Snapshot
// and TenantSnapshot read the budget's levels, and its Pause, Stop and
// Resume act on the budget as from any process.
//
// A budget with a Config.HashTag is named "{<HashTag>}<Name>", the tag
// in braces as in its keys: Open(ctx, rdb, "", "{eu}gpt-4o") opens the
// budget of Config{Name: "gpt-4o", HashTag: "eu"}. A plain name never
// holds braces, so the two never meet.
//
// Open reads the definition once. A later Define is seen by opening the
// budget again; Version says which definition a Pacer runs. Without a
// stored definition, or with one that cannot be used, Open returns an
// error that matches ErrInvalid and says which.
func Open(ctx context.Context, rdb redis.UniversalClient, prefix, name string) (*Pacer, error) {
	tag, name := wire.SplitTag(name)
	// A placeholder limit lets New validate the name and build the keys;
	// the stored definition replaces it before Open returns.
	p, err := New(rdb, Config{Name: name, KeyPrefix: prefix, HashTag: tag, Limits: Limits{RPM: 1}})
	if err != nil {
		return nil, err
	}
	_, v, def, err := p.define(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return nil, fmt.Errorf("%w: no definition of %q is stored under key prefix %q, so Open has nothing to run: store one with Pacer.Define (or give Config a Version and make a call), or check the name and the prefix", ErrInvalid, name, p.s().prefix)
	}
	d, err := decodeDefinition(def)
	var s settings
	if err == nil {
		p.local = Config{Name: name, KeyPrefix: prefix, HashTag: tag}.with(d, v)
		s, err = p.local.settings()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the definition of %q stored in Redis (version %d) cannot be used: %v; store a valid one with Define", ErrInvalid, name, v, err)
	}
	s.version = v
	p.adopt(&s)
	// The definition in force is the stored one: the first call need not
	// settle it again.
	p.defined.Store(true)
	return p, nil
}
